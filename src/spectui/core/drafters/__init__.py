"""Replicas of llama-server's n-gram drafters, and who drafted each step of a chain of types.

An n-gram drafter's decision depends only on the token history and its own state, so spectui
can run it again: tune replays candidates from a baseline's tokens, and a streamed run with a
chain of types (`--spec-type ngram-simple,draft-mtp`) names the drafter of every step
(`drafters.chain`). Imports nothing of spectui's but itself: every layer may use it.
"""
