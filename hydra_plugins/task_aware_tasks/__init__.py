"""The built-in tasks' configs, each in its task's folder: `task=sets` composes
pipeline/tasks/sets/task.yaml.

A config source (scheme `taskfolders://`) shows a folder of task folders to Hydra as one config
group, `task`, with an option per folder holding a task.yaml; a search-path plugin puts it on the
search path of the pipeline's own configs only (the package's conf/: `python -m pipeline`, the
scorer, the compose API on that folder); another Hydra application in the same environment is
left as it is. Hydra puts it after conf/ and before the folders of `-cd`, `--config-dir` and
`hydra.searchpath`, where a plugin task's config goes: as with the built-in configs before, a
task there needs a name of its own (the built-in one of the same name comes first).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from hydra.plugins.search_path_plugin import SearchPathPlugin
from omegaconf import OmegaConf

GROUP = "task"
CONFIG_FILE = "task.yaml"


class TaskFolderConfigSource(ConfigSource):
    """<path>/<name>/task.yaml as the config `task/<name>`."""

    @staticmethod
    def scheme() -> str:
        return "taskfolders"

    def _file(self, config_path: str) -> Path | None:
        group, _, name = self._normalize_file_name(config_path).partition("/")
        if group != GROUP or not name.endswith(".yaml") or "/" in name:
            return None
        path = Path(self.path) / name.removesuffix(".yaml") / CONFIG_FILE
        return path if path.is_file() else None

    def load_config(self, config_path: str) -> ConfigResult:
        path = self._file(config_path)
        if path is None:
            raise ConfigLoadError(f"Config not found: {config_path} in {self.path}")
        text = path.read_text(encoding="utf-8")
        return ConfigResult(
            config=OmegaConf.create(OmegaConf.load(path)),
            path=f"{self.scheme()}://{self.path}",
            provider=self.provider,
            header=ConfigSource._get_header_dict(text[:512]),
        )

    def available(self) -> bool:
        return Path(self.path).is_dir()

    def is_group(self, config_path: str) -> bool:
        return config_path.strip("/") in ("", GROUP)

    def is_config(self, config_path: str) -> bool:
        return self._file(config_path) is not None

    def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
        if config_path.strip("/") == "":
            return [GROUP] if results_filter in (None, ObjectType.GROUP) else []
        if config_path.strip("/") != GROUP or results_filter == ObjectType.GROUP:
            return []
        return sorted(p.parent.name for p in Path(self.path).glob(f"*/{CONFIG_FILE}"))


def _package_folder(package: str) -> Path | None:
    """The folder of `package` without importing it (None where it is not installed)."""
    spec = importlib.util.find_spec(package)
    return (
        Path(spec.submodule_search_locations[0])
        if spec and spec.submodule_search_locations
        else None
    )


class TaskFolderSearchPath(SearchPathPlugin):
    """Adds pipeline/tasks (taskfolders://) where the search path holds the pipeline's conf/."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        tasks, root = _package_folder("pipeline.tasks"), _package_folder("pipeline")
        if tasks is None or root is None:
            return
        ours = {os.path.realpath(root / "conf"), os.path.realpath(root.parent / "conf")}
        # a folder is written with file:// or without it (the primary one, at this point)
        if any(
            e.path
            and "://" not in e.path.removeprefix("file://")
            and os.path.realpath(e.path.removeprefix("file://")) in ours
            for e in search_path.get_path()
        ):
            search_path.append(provider="task-aware-pipeline", path=f"taskfolders://{tasks}")
