"""The comparison document: written whole and atomically after every run, read back to resume.

Rewriting the JSON document (temp file + rename) after each run keeps the file valid at every
instant: a crash at run 37 leaves runs 1–36 in a document that parses, and `--resume` continues
from it. The document also holds the plan (configs, prompts with their checkers, sampling), so a
resumed comparison runs exactly what was planned, on the same binary and model.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    model_validator,
)

from spectui import __version__
from spectui.core.compare.by_content import (
    ContentRow,
    ContentVerdict,
    content_rows,
    content_verdicts,
)
from spectui.core.compare.costmodel import CostModel, fit_runs, predictions
from spectui.core.compare.levels import LevelRow, LevelVerdict, level_rows, level_verdicts
from spectui.core.compare.models import ComparePlan, delivery_out_of_sampling
from spectui.core.compare.records import CompareSessionInfo, RunRecord, ServerStart
from spectui.core.compare.summary import annotate, report_rows
from spectui.core.compare.summary_row import SummaryRow
from spectui.core.errors import SpectuiError, read_bytes
from spectui.core.llama.secrets import mask_argv, secret_values

FORMAT: Literal["spectui-compare/1"] = "spectui-compare/1"
"""Identifies the document format (bumped if a field changes meaning)."""


class ResultFileError(SpectuiError):
    """A results file that cannot be written, read or resumed."""

    title = "Results file problem"
    exit_code = 2


class BinaryInfo(BaseModel):
    """The llama-server every run used."""

    path: str
    """Executable path."""
    version: str | None = None
    """What ``--version`` reported."""
    source: str = ""
    """How spectui found it."""


class ModelInfo(BaseModel):
    """The model every run used."""

    path: str
    """GGUF path."""
    size_bytes: int | None = None
    """File size: a re-downloaded or re-quantised file under the same name shows here."""


class ServerOptions(BaseModel):
    """Launch options shared by every config."""

    ctx_size: int
    """--ctx-size."""
    extra_args: list[str] = Field(default_factory=list)
    """Extra llama-server arguments (after ``--``); secret values are masked in the file."""

    @field_serializer("extra_args", when_used="json")
    def _masked(self, args: list[str]) -> list[str]:
        # A results file gets shared and attached to reports: a secret on the server's command
        # line (--hf-token, --api-key) never reaches it. --resume takes it again (`with_secrets`).
        return mask_argv(args)

    def with_secrets(self, given: Sequence[str], source: Path) -> ServerOptions:
        """These options as read from ``source``, with the secret values the file does not hold
        taken from ``given`` (the resuming command's own server arguments, which must be the
        same arguments as the file's once masked)."""
        if not secret_values(self.extra_args):
            return self
        if mask_argv(given) != self.extra_args:
            shown = " ".join(self.extra_args)
            raise ResultFileError(
                f"{source} was measured with secret llama-server arguments, which it does not "
                f"store: resume with the same ones after -- ({shown}, with the secret values)"
            )
        return self.model_copy(update={"extra_args": list(given)})


class CompareDocument(BaseModel):
    """Everything about one comparison: plan, environment, every run, the summary."""

    model_config = ConfigDict(extra="ignore")

    format: Literal["spectui-compare/1"] = FORMAT
    """Document format."""
    spectui_version: str = __version__
    """spectui that wrote it."""
    created_at: datetime
    """When the comparison began (UTC)."""
    updated_at: datetime
    """When this file was last written (UTC)."""
    complete: bool = False
    """True once every planned run has a record."""
    binary: BinaryInfo
    """The llama-server."""
    model: ModelInfo
    """The model."""
    server: ServerOptions
    """Launch options shared by every config."""
    sampling: dict[str, object] = Field(default_factory=dict)
    """Sampling parameters (a copy of the plan's, for readers)."""
    delivery: dict[str, object] = Field(default_factory=dict)
    """How every request was sent (a copy of the plan's, for readers)."""
    plan: ComparePlan
    """Configs, prompts (with checkers), repetitions and sampling: what --resume continues."""
    configs: list[dict[str, object]] = Field(default_factory=list)
    """Each config's name, label and llama-server args (a copy of the plan's, for readers)."""
    runs: list[RunRecord] = Field(default_factory=list)
    """Every finished run, warm-ups included, in the order they ran."""
    server_starts: list[ServerStart] = Field(default_factory=list)
    """Every (re)start of the server and why."""
    sessions: list[CompareSessionInfo] = Field(default_factory=list)
    """The invocations that ran it (more than one after --resume)."""
    summary: list[SummaryRow] = Field(default_factory=list)
    """One row per config × prompt, with the verdict (runs of one stream at a time)."""
    levels: list[LevelRow] = Field(default_factory=list)
    """One row per concurrency level × config, judged per level (empty unless the plan runs
    more than level 1)."""
    level_verdicts: list[LevelVerdict] = Field(default_factory=list)
    """Per config: where speculation stops paying as streams are added, in one sentence."""
    by_content: list[ContentRow] = Field(default_factory=list)
    """One row per config × content class of the prompts (`by_content`), judged by the rule
    where the class has enough rounds for a verdict of its own."""
    content_verdicts: list[ContentVerdict] = Field(default_factory=list)
    """Per config: its verdict per content class, in one sentence."""
    restarts: str = ""
    """How the server was restarted between configs and rounds, in one sentence."""
    cost_model: CostModel | None = None
    """Step cost fitted on every counted run (`costmodel`); None until runs can fix it."""

    @model_validator(mode="before")
    @classmethod
    def _older_sampling(cls, data: Any) -> Any:
        # The copies of a file written before `Delivery`, in the plan's new shape.
        return delivery_out_of_sampling(data)

    @classmethod
    def new(
        cls,
        plan: ComparePlan,
        *,
        binary: BinaryInfo,
        model: ModelInfo,
        server: ServerOptions,
    ) -> CompareDocument:
        """An empty document for ``plan``."""
        now = datetime.now(UTC)
        return cls(
            created_at=now,
            updated_at=now,
            binary=binary,
            model=model,
            server=server,
            sampling=plan.sampling.model_dump(mode="json"),
            delivery=plan.delivery.model_dump(mode="json"),
            plan=plan,
            configs=[
                c.model_dump(mode="json", include={"name", "label", "args"}) for c in plan.configs
            ],
        )

    def updated(
        self,
        runs: Sequence[RunRecord],
        starts: Sequence[ServerStart],
        sessions: Sequence[CompareSessionInfo],
    ) -> CompareDocument:
        """This document with the runs so far, their correctness and a fresh summary."""
        planned = len(self.plan.jobs())
        runs = annotate(self.plan, runs)
        # The step-cost model is fitted at one level (its batches' size is learnt from which
        # slots shared them, `costbatch`): one stream's where there are such runs, else the
        # lowest level's (a `tune --concurrency N` runs at N only; its warm-ups, one stream
        # each, are not fitted).
        lowest = min((r.level for r in runs if not r.warmup), default=1)
        single = [r for r in runs if r.level == lowest]
        cost = fit_runs(self.plan, single)
        priced = {r.seq: r for r in predictions(self.plan, single, cost)}
        summary = report_rows(self.plan, runs)
        by_content = content_rows(self.plan, runs, summary)  # (a class is held to its prompts)
        judged = self.plan.concurrency != (1,) or self.plan.arrivals is not None
        levels = level_rows(self.plan, runs) if judged else []
        return self.model_copy(
            update={
                "updated_at": datetime.now(UTC),
                "complete": len({r.seq for r in runs}) >= planned,
                "runs": [priced.get(r.seq, r) for r in runs],
                "cost_model": cost,
                "levels": levels,
                "level_verdicts": level_verdicts(self.plan, levels),
                "by_content": by_content,
                "content_verdicts": content_verdicts(self.plan, by_content),
                "server_starts": list(starts),
                "sessions": list(sessions),
                "summary": summary,
                "restarts": restart_statement(self.plan, starts),
            }
        )


def restart_statement(plan: ComparePlan, starts: Sequence[ServerStart]) -> str:
    """One sentence for the report: when the server was restarted, and why."""
    if not starts:
        return "no server started yet"
    switches = sum(1 for s in starts if s.reason.startswith("switch from"))
    others = [s.reason for s in starts if not s.reason.startswith("switch from")]
    text = (
        f"{len(starts)} server starts: one server at a time, restarted only to change config "
        f"({switches} switches)"
    )
    if len(plan.configs) == 1:
        text = f"{len(starts)} server starts: one config, never restarted between rounds"
    extra = [r for r in others if r != "first start"]
    if extra:
        text += "; also " + ", ".join(sorted(set(extra)))
    return text


class ResultLock:
    """An exclusive lock on a results file while a comparison writes it.

    Two comparisons writing one file (a second --resume while the first still runs) would
    interleave their runs and, worse, load two servers at once and skew each other's numbers.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock_path = path.with_name(f".{path.name}.lock")
        self._handle: IO[str] | None = None

    def __enter__(self) -> ResultLock:
        try:
            self.lock_path.parent.mkdir(parents=True, exist_ok=True)
            handle = self.lock_path.open("a+", encoding="utf-8")
        except OSError as error:
            raise ResultFileError(f"cannot write {self.path}: {error.strerror or error}") from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            handle.close()
            raise ResultFileError(
                f"{self.path} is being written by another spectui compare (pid {holder}); "
                "let it finish or use another file"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._handle = handle
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self.lock_path.unlink(missing_ok=True)  # still ours: nobody else got the lock
            self._handle.close()  # closing releases the lock
            self._handle = None


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so a reader (or a crash) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with partial.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        partial.replace(path)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise ResultFileError(f"cannot write {path}: {error.strerror or error}") from None


def dump_document(document: CompareDocument) -> str:
    """The document as JSON text."""
    return document.model_dump_json(indent=1) + "\n"


Doc = TypeVar("Doc", bound=BaseModel)


def load_results(path: Path, model: type[Doc], what: str) -> Doc:
    """A results file of ``model`` (``what``: e.g. 'compare results'); one clear line when it
    is not one."""
    raw = read_bytes(path, f"{what} file", ResultFileError)
    try:
        return model.model_validate_json(raw)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "document"
        raise ResultFileError(
            f"{path} is not a spectui {what} file ({where}: {first['msg']})"
        ) from None


def load_document(path: Path) -> CompareDocument:
    """A results file written by `spectui compare`; one clear line when it is not one."""
    return load_results(path, CompareDocument, "compare results")


def check_same_setup(document: CompareDocument, binary: BinaryInfo, model: ModelInfo) -> None:
    """Refuse to resume on another binary or model: the runs would not be comparable."""
    if Path(document.binary.path) != Path(binary.path) or document.binary.version != (
        binary.version
    ):
        raise ResultFileError(
            f"the comparison was measured with llama-server {document.binary.path} "
            f"({document.binary.version or 'unknown version'}), this one is {binary.path} "
            f"({binary.version or 'unknown version'}): resuming would mix binaries"
        )
    if Path(document.model.path) != Path(model.path) or document.model.size_bytes != (
        model.size_bytes
    ):
        raise ResultFileError(
            f"the comparison was measured with model {document.model.path}, "
            f"this one is {model.path} (or the file changed): resuming would mix models"
        )


def finished_seqs(document: CompareDocument) -> set[int]:
    """Schedule positions that already have a record (they are not run again)."""
    planned = {job.seq: job for job in document.plan.jobs()}
    done: set[int] = set()
    for run in document.runs:
        job = planned.get(run.seq)
        if job is None or (job.config, job.prompt, job.round) != (
            run.config,
            run.prompt,
            run.round,
        ):
            raise ResultFileError(
                f"run {run.seq} in the results file does not match its plan (edited by hand?)"
            )
        done.add(run.seq)
    return done
