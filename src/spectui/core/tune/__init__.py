"""`spectui tune`: search this binary's spec configs for the one that wins on the user's prompts.

`space` builds the candidates from ``--help``; `search` races them under the compare rules;
`report` turns the races into leaderboards, winners and hints.
"""
