"""Read what wandb wrote offline: the records of a run file (wandb's own datastore reader and
protobuf types) and the tables it logged as files of the run."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class OfflineRun:
    path: Path  # the run's folder, offline-run-*
    name: str = ""
    job_type: str = ""
    group: str = ""
    start_ns: int = 0
    tags: list[str] = field(default_factory=list)
    config: dict = field(default_factory=dict)
    history: list[dict] = field(default_factory=list)  # one dict per logged step
    summary: dict = field(default_factory=dict)
    logged: list = field(default_factory=list)  # ArtifactRecords with use_after_commit False
    used: list = field(default_factory=list)  # ArtifactRecords with use_after_commit True

    def table(self, key: str) -> dict:
        """A logged wandb.Table, as its JSON file ({"columns": [...], "data": [[...], ...]})."""
        entry = next(step[key] for step in self.history if key in step)
        return json.loads((self.path / "files" / entry["path"]).read_text())


def _nested(items) -> dict:
    out: dict = {}
    for item in items:
        keys = list(item.nested_key) or [item.key]
        node = out
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = json.loads(item.value_json)
    return out


def read_run(run_dir: Path, wait_s: float = 20.0) -> OfflineRun:
    """The run's records; waits (up to `wait_s`) for its exit record, which wandb-core writes
    last: on a loaded machine the file may still be written when `finish()` has returned, and
    a record caught half-written fails wandb's checksum (read again until the wait is over)."""
    import time

    deadline = time.monotonic() + wait_s
    while True:
        try:
            run, complete = _scan(run_dir)
        except AssertionError:  # wandb's checksum of a record wandb-core is still writing
            if time.monotonic() > deadline:
                raise  # still torn after the wait: the file is really damaged
            complete = False
        else:
            if complete or time.monotonic() > deadline:
                return run
        time.sleep(0.2)


def _scan(run_dir: Path) -> tuple[OfflineRun, bool]:
    from wandb.proto import wandb_internal_pb2 as pb
    from wandb.sdk.internal import datastore

    run, complete = OfflineRun(run_dir), False
    ds = datastore.DataStore()
    ds.open_for_scan(str(next(run_dir.glob("*.wandb"))))
    while (data := ds.scan_data()) is not None:
        rec = pb.Record()
        rec.ParseFromString(data)
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            run.name, run.job_type, run.group = (
                rec.run.display_name,
                rec.run.job_type,
                rec.run.run_group,
            )
            run.tags = list(rec.run.tags)
            run.start_ns = rec.run.start_time.ToNanoseconds()
            run.config = {i.key: json.loads(i.value_json) for i in rec.run.config.update}
        elif kind == "history":
            run.history.append(_nested(rec.history.item))
        elif kind == "config":  # config sent after the run record
            run.config.update({i.key: json.loads(i.value_json) for i in rec.config.update})
        elif kind == "summary":
            run.summary.update(_nested(rec.summary.update))
        elif kind == "artifact":
            (run.used if rec.artifact.use_after_commit else run.logged).append(rec.artifact)
        elif kind == "exit":
            complete = True
    return run, complete


def read_runs(wandb_dir: Path) -> list[OfflineRun]:
    """Every offline run under `wandb_dir`, in the order they were started (folder names have
    whole seconds only)."""
    return sorted((read_run(p) for p in wandb_dir.glob("offline-run-*")), key=lambda r: r.start_ns)
