"""The reference is placed into the samples' clusters and never shapes them (issue 12): with or
without a reference, the samples' and decodes' latents are the same."""

import pandas as pd

from pipeline.config import resolve_cell
from pipeline.mapping.labels import attach_labels, representatives
from pipeline.tasks.graphs.reading import merge_graphs


def shared_word(question, labels):
    """Equivalence for the test: labels sharing a word are one cluster (transitively)."""
    parent = list(range(len(labels)))

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(len(labels)):
        for j in range(i):
            if set(labels[i].split()) & set(labels[j].split()):
                parent[root(i)] = root(j)
    return [root(i) for i in range(len(labels))]


SAMPLES = [
    frozenset({("alice", "met", "bob smith")}),
    frozenset({("alice", "met", "carol jones")}),
    frozenset({("alice", "met", "bob smith")}),
]
BRIDGE = frozenset({("alice", "met", "smith jones")})  # joins both of the samples' clusters


def test_a_bridging_reference_leaves_the_samples_clusters_alone():
    alone = merge_graphs(SAMPLES, shared_word)
    with_ref = merge_graphs([*SAMPLES, BRIDGE], shared_word, n_attached=1)
    assert with_ref[:3] == alone
    assert alone[1] == frozenset({("alice", "met", "carol jones")})  # not merged into bob smith
    # the reference takes the representative of the most frequent sample cluster it touches
    assert with_ref[3] == frozenset({("alice", "met", "bob smith")})
    # the old behaviour (the reference clustered with the samples) merged carol into bob
    assert merge_graphs([*SAMPLES, BRIDGE], shared_word)[1] == frozenset(
        {("alice", "met", "bob smith")}
    )


def test_attached_label_without_a_sample_cluster_stays_itself():
    rep = representatives(
        "q", ["paris", "paris", "lyon"], shared_word, attached=["nice", "paris city"]
    )
    assert rep == {"paris": "paris", "lyon": "lyon", "nice": "nice", "paris city": "paris"}
    assert representatives("q", ["a"], None, attached=["b"]) == {"a": "a", "b": "b"}


def test_attach_labels_through_a_joint_clustering():
    own_of = {"bob smith": "bob smith", "carol jones": "carol jones"}
    joint_of = {"bob smith": "bob", "carol jones": "bob", "smith jones": "bob", "eve": "eve"}
    out = attach_labels(own_of, joint_of, ["bob smith", "carol jones"], ["smith jones", "eve"])
    assert out == {**own_of, "smith jones": "bob smith", "eve": "eve"}


def test_map_stage_samples_latents_do_not_depend_on_the_reference(compose_cfg, tmp_path):
    from pipeline.stages.map import map_cell

    cfg = compose_cfg("dataset=cnn_dm_bundled", f"cache_dir={tmp_path}")
    texts = [
        "Alice met Bob Smith in Paris.",
        "Alice met Carol Jones in Paris.",
        "Alice met Bob Smith in Paris.",
    ]
    samples = pd.DataFrame({"prompt_id": ["p0"] * 3, "sample_idx": [0, 1, 2], "text": texts})
    decodes = pd.DataFrame({"prompt_id": ["p0"], "strategy": ["greedy"], "text": [texts[0]]})

    def run(reference):
        dataset = pd.DataFrame(
            {"prompt_id": ["p0"], "question": ["(article)"], "reference_text": [reference]}
        )
        return map_cell(resolve_cell(cfg), dataset, samples, decodes)

    without, with_ref = run(""), run("Alice met Smith Jones in Paris.")
    assert list(with_ref["source"]) == ["sample"] * 3 + ["greedy", "reference"]
    pd.testing.assert_frame_equal(with_ref.iloc[:4], without)
    assert with_ref["parse_ok"].iloc[4]
