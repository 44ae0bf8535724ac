"""Where the package's own files are: in a source checkout (editable install) and in a wheel.

The repository keeps the Hydra configs in the top-level conf/ and the paper's published numbers
in results/paper/ (docs, Makefile and tests name them there). A wheel carries copies inside the
package, as pipeline/conf/ and pipeline/paper/ (setup.py maps the two folders into it), so an
installed package runs from any directory. Each lookup tries the package first, then the
checkout.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.runtime.errors import ConfigError

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # pipeline/
CHECKOUT_DIR = PACKAGE_DIR.parent  # the repository root when the package runs from a checkout

# name -> (folder inside the wheel, folder in the checkout, a file that must be there)
_PLACES = {
    "conf": (PACKAGE_DIR / "conf", CHECKOUT_DIR / "conf", "config.yaml"),
    "paper": (PACKAGE_DIR / "paper", CHECKOUT_DIR / "results" / "paper", "generation.csv"),
}


def _find(name: str) -> Path | None:
    installed, checkout, marker = _PLACES[name]
    return next((d for d in (installed, checkout) if (d / marker).is_file()), None)


def _missing(name: str) -> ConfigError:
    installed, checkout, marker = _PLACES[name]
    return ConfigError(
        f"{marker} not found in {installed} nor {checkout}: the package is "
        "installed without its data; reinstall it from the repository "
        "(pip install . or pip install -e .)"
    )


def conf_dir() -> Path:
    """The Hydra configs (config.yaml and the groups: task/, dataset/, model/, ...)."""
    if (path := _find("conf")) is None:
        raise _missing("conf")
    return path


def conf_path() -> str:
    """conf_dir() for `@hydra.main(config_path=...)`, evaluated on import: never raises (where the
    configs are missing, the path of the checkout's conf/, which Hydra then reports absent)."""
    return str(_find("conf") or _PLACES["conf"][1])


def paper_dir() -> Path:
    """The paper's published numbers (generation.csv, uq.csv, prr_rank.csv; results/paper).
    Read on import of pipeline.reporting: never raises (where they are missing, the checkout's
    results/paper, which the report stage then finds absent)."""
    return _find("paper") or _PLACES["paper"][1]
