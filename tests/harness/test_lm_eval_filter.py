"""The task_aware filter and its metrics inside lm-evaluation-harness (issue 56), on lm-eval's
own objects: its TaskManager builds the shipped task from its YAML (`--include_path`), its
Task builds the Instances of the bundled file, the responses are set as a model would (no
model runs in the fast suite; tests/harness/test_lm_eval_slow.py runs one), lm-eval applies
the filters, and the task's process_results and aggregations give the numbers, which must equal
`pipeline.score` (taskaware-score) on the samples file lm-eval would log for the same run."""

from __future__ import annotations

import json
import random
import warnings
from collections import defaultdict

import pytest

lm_eval = pytest.importorskip("lm_eval", reason="the lm-eval extra (pip install '.[lm-eval]')")

import pipeline
from pipeline.harness import TASKS


def _task(name: str, limit: int):
    from lm_eval.tasks import TaskManager, get_task_dict

    task = get_task_dict([name], TaskManager(include_path=str(TASKS)))[name]
    task.build_all_requests(limit=limit, rank=0, world_size=1)
    return task


def _respond(task, answer_of, seed: int = 0) -> None:
    """Each instance's `repeats` responses, as the model would have sampled them."""
    rng = random.Random(seed)
    for inst in task.instances:
        inst.resps = [answer_of(inst.doc, rng) for _ in range(task.config.repeats)]


def _results(task) -> dict[str, dict[str, float]]:
    """{filter: {metric: aggregated value}} as lm-eval's evaluator computes them."""
    task.apply_filters()
    values: dict[tuple[str, str], list] = defaultdict(list)
    for inst in sorted(task.instances, key=lambda i: i.doc_id):
        for key, resp in inst.filtered_resps.items():
            for metric, value in task.process_results(inst.doc, [resp]).items():
                values[(key, metric)].append(value)
    aggregation, out = task.aggregation(), defaultdict(dict)
    for (key, metric), v in values.items():
        out[key][metric] = aggregation[metric](v)
    return out


def _samples_file(task, path) -> None:
    """The samples file `lm_eval --log_samples` writes (lm-eval 0.4.13's evaluate(): one record
    per document and filter, with resps and filtered_resps)."""
    with path.open("w") as fh:
        for inst in sorted(task.instances, key=lambda i: i.doc_id):
            for key, resp in inst.filtered_resps.items():
                fh.write(
                    json.dumps(
                        {
                            "doc_id": inst.doc_id,
                            "doc": inst.doc,
                            "target": task.doc_to_target(inst.doc),
                            "arguments": [list(map(str, inst.args))],
                            "resps": [list(inst.resps)],
                            "filtered_resps": [str(resp)],
                            "filter": key,
                        }
                    )
                    + "\n"
                )


def _taskaware_score(task, path, space_task: str):
    """taskaware-score on the samples file of the run: (rows, UQ summary, quality summary)."""
    _samples_file(task, path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scored = pipeline.score(path, task=space_task, fmt="lm-eval", lm_eval_filter="task_aware")
    return (scored, *pipeline.summaries(scored))


def _triviaqa_answer(doc, rng):
    alias = doc["aliases"][0]
    return rng.choice([alias, f"It is {alias}.", alias.lower(), "Paris", "London", "I am not sure"])


def test_the_filter_gives_the_bayes_answer_and_lm_eval_aggregates_prr_and_auc(tmp_path):
    task = _task("taskaware_triviaqa_bundled", limit=12)
    assert task.config.repeats == 5 and len(task.instances) == 12
    _respond(task, _triviaqa_answer)
    results = _results(task)
    ours, vote = results["task_aware"], results["majority_vote"]
    assert set(vote) == {"exact_match"}  # lm-eval's own filter beside ours, in the same run
    for metric in (
        "exact_match",
        "bayes_exact_match_error",
        "bayes_risk",
        "confidence",
        "prr_bayes_risk",
        "prr_low_bayes_risk",
        "prr_high_bayes_risk",
        "auc_bayes_risk",
        "auc_low_bayes_risk",
        "auc_high_bayes_risk",
    ):
        assert metric in ours, metric
    assert ours["prr_low_bayes_risk"] <= ours["prr_bayes_risk"] <= ours["prr_high_bayes_risk"]
    assert ours["auc_low_bayes_risk"] <= ours["auc_bayes_risk"] <= ours["auc_high_bayes_risk"]

    # the numbers of taskaware-score on the samples file of the same run
    path = tmp_path / "samples_taskaware_triviaqa_bundled.jsonl"
    scored, uq, quality = _taskaware_score(task, path, "classes")
    risk = uq[(uq["estimator"] == "bayes_risk") & (uq["metric"] == "exact_match_error")].iloc[0]
    assert ours["prr_bayes_risk"] == pytest.approx(risk["prr"], abs=1e-12)
    assert ours["prr_low_bayes_risk"] == pytest.approx(risk["prr_low"], abs=1e-12)
    assert ours["prr_high_bayes_risk"] == pytest.approx(risk["prr_high"], abs=1e-12)
    assert ours["auc_bayes_risk"] == pytest.approx(risk["auc"], abs=1e-12)
    assert ours["auc_high_bayes_risk"] == pytest.approx(risk["auc_high"], abs=1e-12)
    assert ours["bayes_risk"] == pytest.approx(scored["bayes_risk"].mean(), abs=1e-12)
    mean = quality.set_index(["metric", "method"]).loc[("exact_match_error", "bayes"), "mean"]
    assert ours["bayes_exact_match_error"] == pytest.approx(mean, abs=1e-12)
    # the filtered responses lm-eval logs are the Bayes answers
    logged = [json.loads(line) for line in path.read_text().splitlines()]
    answers = [r["filtered_resps"][0] for r in logged if r["filter"] == "task_aware"]
    assert answers == scored["bayes_text"].tolist()


def test_a_set_task_reads_each_response_as_a_set_and_scores_f1(tmp_path):
    task = _task("taskaware_maqa_bundled", limit=8)

    def answer(doc, rng):
        names = [a[0] for a in doc["answers"]]
        return ", ".join(rng.sample(names, rng.randint(1, len(names))))

    _respond(task, answer, seed=3)
    ours = _results(task)["task_aware"]
    assert 0 < ours["bayes_f1"] <= 1 and ours["bayes_hamming"] >= 0
    scored, uq, _ = _taskaware_score(task, tmp_path / "samples.jsonl", "sets")
    first = uq[(uq["estimator"] == "bayes_risk") & (uq["metric"] == "hamming")].iloc[
        0
    ]  # the first metric
    assert ours["prr_bayes_risk"] == pytest.approx(first["prr"], abs=1e-12)
    assert ours["bayes_f1"] == pytest.approx(scored["quality_bayes_f1"].mean(), abs=1e-12)


def test_the_filter_is_in_lm_evals_registry_under_its_name():
    from lm_eval.api.registry import get_filter

    import pipeline.harness.filter as ours

    assert get_filter("task_aware") is ours.TaskAwareFilter
