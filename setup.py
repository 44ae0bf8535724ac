"""The package list, which pyproject.toml cannot declare: besides `pipeline*` and
`hydra_plugins*`, two folders of the repository ship inside the wheel as package data:

    conf/          -> pipeline/conf/   the Hydra configs (`python -m pipeline`, pipeline.score)
    results/paper/ -> pipeline/paper/  the paper's published numbers (the report stage)

(each built-in task's config, pipeline/tasks/<name>/task.yaml, ships with its package) so an
installed package runs from any directory. The repository keeps them where docs, Makefile
and tests name them; pipeline/runtime/resources.py looks in the package first, then in the checkout
(editable installs and runs from the repository). Everything else is in pyproject.toml.
"""

from setuptools import find_namespace_packages, setup

setup(
    packages=[
        *find_namespace_packages(include=["pipeline*", "hydra_plugins*"]),
        "pipeline.conf",
        "pipeline.paper",
    ],
    package_dir={"pipeline.conf": "conf", "pipeline.paper": "results/paper"},
    package_data={
        "pipeline": [
            "data/bundled/*.jsonl",
            "data/bundled/*.md",
            "py.typed",
            "tasks/*/task.yaml",
            "harness/tasks/*.yaml",
        ],
        "pipeline.conf": ["**/*.yaml"],
        "pipeline.paper": ["*.csv", "README.md"],
    },
)
