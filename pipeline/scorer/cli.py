"""The scorer's command line: `taskaware-score FILE --task T` (also `python -m pipeline.score`).

Parses the arguments, runs `pipeline.scorer.run.score`, prints the summary (and the audit or
report asked for); a bad input or a failed outside service is one `error:` line and exit 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from pipeline.clients.llm_client import LLMCallError
from pipeline.mapping.settings import EXTRACTOR_KINDS
from pipeline.runtime.errors import PipelineError
from pipeline.scorer.readers import FORMATS, ScoreInputError
from pipeline.scorer.report import (
    CONFIDENCE_COLUMN,
    ENTROPY_COLUMNS,
    OURS_COLUMN,
    RISK_COLUMN,
    audit_report,
    write_report,
)
from pipeline.scorer.run import ScoreWarning, score, summaries, summary_paths


def sample_counts_line(df) -> str:
    """How the samples counted and how many prompts abstain, in one line."""
    counts = {
        name: int(df[name].sum()) if name in df else 0
        for name in ("n_truncated", "n_no_answer", "n_discarded")
    }
    abstained = int((df["abstention"] != "").sum()) if "abstention" in df else 0
    return (
        f"samples not read: {counts['n_no_answer']} counted as 'no answer', "
        f"{counts['n_discarded']} discarded ({counts['n_truncated']} cut by the token limit); "
        f"{abstained} of {len(df)} prompts abstain (column abstention)"
    )


def format_summary(df) -> str:
    """The short stdout table: counts, mean quality per method, PRR/AUC of the uncertainties."""
    head = (
        f"scored {len(df)} prompts, {int(df['n_samples'].sum())} responses, "
        f"{int(df['n_parsed'].sum())} parsed; mean Bayes risk "
        f"{df[RISK_COLUMN].mean():.4g}"
        + "".join(f", mean {e.replace('_', ' ')} {df[e].mean():.4g}" for e in ENTROPY_COLUMNS)
    )
    head += "\n" + sample_counts_line(df)
    if df.attrs.get("skipped"):
        head += (
            f"\nskipped {len(df.attrs['skipped'])} of {df.attrs['n_rows']} input rows "
            "(see the warning)"
        )
    reading = df.attrs.get("reading_warnings")
    if reading:
        head += "\nreading warnings (prompts): " + ", ".join(f"{k} {v}" for k, v in reading.items())
    lines = [head]
    uq, quality = summaries(df)
    if quality is not None and len(quality):
        lines.append("")
        w = max(12, *(len(m) for m in quality["metric"]))
        lines.append(f"{'metric':<{w}} {'method':<18} {'mean':>9} {'n':>6}")
        for r in quality.itertuples():
            arrow = "higher better" if r.higher_is_better else "lower better"
            lines.append(f"{r.metric:<{w}} {r.method:<18} {r.mean:>9.4g} {r.n:>6}  ({arrow})")
    if uq is not None and len(uq):
        lines.append("")
        w = max(12, *(len(m) for m in uq["metric"]))
        lines.append(
            f"{'uncertainty':<15} {'metric':<{w}} {'PRR [95% CI]':<26} {'AUC [95% CI]':<26} n"
        )
        for r in uq.itertuples():
            prr = f"{r.prr:.3f} [{r.prr_low:.3f}, {r.prr_high:.3f}]"
            auc = f"{r.auc:.3f} [{r.auc_low:.3f}, {r.auc_high:.3f}]"
            lines.append(f"{r.estimator:<15} {r.metric:<{w}} {prr:<26} {auc:<26} {r.n}")
    elif quality is None:
        lines.append("(no references in the input: no quality, PRR or AUC)")
    return "\n".join(lines)


# size: a flat list of the command line's options, one add_argument each (with its help text):
# split up, the options would be harder to find, not easier to read
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="taskaware-score",
        description="Task-aware Bayes decisions and uncertainty for responses you already sampled.",
        epilog="Extra KEY=VALUE arguments are Hydra overrides of the pipeline config, e.g. "
        "task.equivalence.threshold=0.9 evaluation.n_bootstrap=200. See docs/score.md.",
    )
    p.add_argument("input", help="JSONL, parquet or lm-evaluation-harness samples_*.jsonl file")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="Hydra-style config overrides")
    p.add_argument(
        "--task",
        required=True,
        help="task config: classes, sets, sets_fbeta, graphs, sphere, simplex, reals "
        "(pipeline/tasks/<name>/task.yaml, or task/<name>.yaml under --config-dir)",
    )
    p.add_argument(
        "--mapper", default="rule", help=f"g_T kind: {', '.join(EXTRACTOR_KINDS)} (default rule)"
    )
    p.add_argument(
        "--format", default="auto", dest="fmt", help=f"{', '.join(FORMATS)} (default auto)"
    )
    p.add_argument("--out", help="output file: .parquet, .jsonl or .csv (summaries next to it)")
    p.add_argument(
        "--work-dir", help="artifact store directory (default: next to --out, else temp)"
    )
    p.add_argument("--id-field")
    p.add_argument("--question-field")
    p.add_argument("--responses-field", help="lm-eval: resps (default) or filtered_resps")
    p.add_argument("--reference-field", help="lm-eval: target (default) or e.g. doc.answers")
    p.add_argument("--logprobs-field", help="per-response sequence log-probs (list of floats)")
    p.add_argument("--lm-eval-filter", help="lm-eval files with several filters: which to score")
    p.add_argument(
        "--strict",
        action="store_true",
        help="stop at the first bad input row (default: skip bad rows, list them and "
        "write them to OUT.skipped.jsonl)",
    )
    p.add_argument(
        "--config-dir",
        action="append",
        default=[],
        dest="config_dirs",
        help="another config folder (your task/dataset configs); repeatable",
    )
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        dest="plugins",
        help="a module to import first (your registrations); repeatable",
    )
    p.add_argument(
        "--audit",
        type=int,
        default=0,
        metavar="N",
        help="print the N riskiest and the N most surprising prompts as text: how "
        "each response and the reference were read and matched",
    )
    p.add_argument(
        "--report",
        metavar="DIR",
        help="write riskiest.md (the riskiest prompts, explained) and, with "
        "references, risk_coverage and calibration figures into DIR",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="print only warnings and errors")
    return p


def _score(args: argparse.Namespace):
    return score(
        args.input,
        args.task,
        args.mapper,
        fmt=args.fmt,
        out=args.out,
        id_field=args.id_field,
        question_field=args.question_field,
        responses_field=args.responses_field,
        reference_field=args.reference_field,
        logprobs_field=args.logprobs_field,
        lm_eval_filter=args.lm_eval_filter,
        overrides=args.overrides,
        work_dir=args.work_dir,
        strict=args.strict,
        config_dirs=args.config_dirs,
        plugins=args.plugins,
        # rows written to --out and not printed: no per-sample objects in memory
        lean=bool(args.out) and not args.audit and not args.report,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (`argv`, default sys.argv): 0 when scored; 2 after one `error:` line (a
    bad option or input, a failed outside service, a --report that cannot be written);
    REQUEUE_EXIT when a signal stopped it cleanly."""
    from pipeline.runtime.stopping import install_early_stop

    if argv is None:  # the command line (not a caller's in-process main([...]))
        install_early_stop("error: ")
    for stream in (sys.stdout, sys.stderr):  # odd bytes in paths or ids must not crash a print
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    args = build_parser().parse_intermixed_args(argv)
    _set_up_logging(args.quiet)
    if (problem := _overrides_problem(args.overrides)) is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2

    from pipeline.runtime.stopping import REQUEUE_EXIT, StopRequested, stopping_cleanly

    with warnings.catch_warnings():
        warnings.simplefilter("always", ScoreWarning)
        warnings.showwarning = _show_warning
        try:
            with stopping_cleanly(exiting=True):
                df = _score(args)
        except StopRequested as stop:
            # every write is atomic: the part in flight is dropped whole, finished parts kept
            print(
                f"error: {stop}: stopped cleanly (finished parts are kept; --out is whole: the "
                "previous one or this run's); rerun the same command to resume",
                file=sys.stderr,
            )
            if argv is None:  # the command line: exit now, not after the part pool's atexit
                sys.stdout.flush()  # join (a worker killed mid-task can leave it waiting)
                sys.stderr.flush()
                os._exit(REQUEUE_EXIT)
            return REQUEUE_EXIT
        except (ScoreInputError, FileNotFoundError, PipelineError, LLMCallError) as exc:
            # bad input, or an outside service that failed (no key, endpoint down, calls failed
            # beyond task.extractor.max_failed_share): what and how to fix, no traceback
            error: Exception | None = exc
        else:
            error = None
    if error is not None:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return _print_results(df, args)


def _set_up_logging(quiet: bool) -> None:
    """Offline when the hub is out of reach, INFO logs (WARNING with -q), the chatty libraries
    at WARNING."""
    from pipeline.runtime.offline import go_offline_if_unreachable

    go_offline_if_unreachable()  # a mapper or embedder never waits on hub retries offline
    logging.basicConfig(
        level=logging.WARNING if quiet else logging.INFO, format="%(levelname)s %(message)s"
    )
    for noisy in ("sentence_transformers", "transformers", "httpx", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _overrides_problem(overrides: Sequence[str]) -> str | None:
    """What is wrong with the KEY=VALUE overrides (a secret in one, or not KEY=VALUE), or None;
    checked before anything quotes a value."""
    from pipeline.runtime.secrets import argv_problem

    if (problem := argv_problem(overrides)) is not None:
        return problem
    bad = [o for o in overrides if "=" not in o]
    if bad:
        return f"{bad[0]!r} is neither an option nor a KEY=VALUE override; see --help"
    return None


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    # at once, not after the run: the skipped rows are known before the long part starts
    print(f"warning: {message}", file=sys.stderr, flush=True)


def _print_results(df, args: argparse.Namespace) -> int:
    """The summary, the audit and report asked for, and the files written (or, without --out,
    the rows as a table): 0, or 2 when the report cannot be written."""
    print(format_summary(df))
    if args.audit > 0:
        print("\n" + audit_report(df, args.audit))
    if args.report:
        try:
            written = write_report(df, args.report, n=max(args.audit, 10))
        except (PipelineError, OSError) as exc:  # a full disk: one line (the rows are written)
            print(f"error: --report {args.report}: {exc}", file=sys.stderr)
            return 2
        print("\nreport: " + ", ".join(map(str, written.values())))
    if args.out:
        print("\nwrote " + ", ".join(_written_files(df, args.out)))
    else:
        print("\n" + _rows_table(df))
    return 0


def _written_files(df, out: str) -> list[str]:
    """--out, the summaries next to it (with references) and the skipped rows' list (if any)."""
    summary, quality = summary_paths(Path(out))
    has_summary = df.attrs.get("summary") is not None
    return [
        out,
        *([str(summary), str(quality)] if has_summary else []),
        *([df.attrs["skipped_path"]] if df.attrs.get("skipped_path") else []),
    ]


def _rows_table(df) -> str:
    """The rows as a table to print: ids, Bayes answers (an abstention in words), risks."""
    cols = [
        "prompt_id",
        "n_parsed",
        f"{OURS_COLUMN}_text",
        RISK_COLUMN,
        CONFIDENCE_COLUMN,
        *ENTROPY_COLUMNS,
    ]
    shown = df[cols].copy()
    if "abstention" in df:  # an empty answer said in words
        text = f"{OURS_COLUMN}_text"
        shown[text] = [
            t if not a else f"({a.split(':')[0]})" for t, a in zip(df[text], df["abstention"])
        ]
    return shown.to_string(index=False, max_colwidth=40)


if __name__ == "__main__":
    sys.exit(main())
