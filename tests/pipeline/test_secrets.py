"""No key reaches disk (issue 38): a URL setting holding credentials is refused before Hydra
writes its run folder; one written in a config file is refused with Hydra's saved copies
redacted. Each run below greps every file it wrote for the key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.runtime.secrets import REDACTED, argv_problem, redact_files, url_secrets

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-chaos-0123456789abcdef"


@pytest.mark.parametrize(
    "text, secrets",
    [
        (f"http://user:{KEY}@host:8000/v1", [f"user:{KEY}"]),
        (f"https://{KEY}@api.example.com/v1", [KEY]),
        (f"https://api.example.com/v1?api-version=2024&api_key={KEY}", [KEY]),
        (f"https://x.blob.core.windows.net/c?sv=1&sig={KEY}", [KEY]),
        (f"[http://a:1/v1,http://u:{KEY}@b:2/v1]", [f"u:{KEY}"]),
        ("http://127.0.0.1:8000/v1", []),
        ("https://api.example.com/v1?api-version=2024", []),
        ("not a url: user:pass@host", []),
        # issue 53: a fragment, path parameters and the names other services use
        (f"http://h:9/v1#api_key={KEY}", [KEY]),
        (f"http://h:9/v1;api_key={KEY}", [KEY]),
        *[
            (f"https://h/v1?api-version=2024&{name}={KEY}", [KEY])
            for name in (
                "x-api-key",
                "client_secret",
                "hf_token",
                "private_token",
                "X-Amz-Signature",
                "subscription-key",
                "auth_token",
                "X-Amz-Security-Token",
            )
        ],
        ("https://h/v1?sort=asc&monkey=1&api-version=2", []),
        # round 3b (the independent attack run): camelCase, run-together and other names
        *[
            (f"https://h/v1?{name}={KEY}", [KEY])
            for name in (
                "accessToken",
                "authToken",
                "clientSecret",
                "apitoken",
                "passphrase",
                "jwt",
            )
        ],
        ("https://h/v1?keyword=x&tokens=3", []),
    ],
)
def test_url_secrets_finds_userinfo_and_key_like_query_values(text, secrets):
    assert url_secrets(text) == secrets


def test_argv_problem_names_the_setting_and_host_never_the_key():
    problem = argv_problem(["stage=plan", f"backend.base_url=http://u:{KEY}@gpu-7:8000/v1"])
    assert problem.startswith("backend.base_url holds credentials inside a URL (for host gpu-7)")
    assert KEY not in problem
    assert argv_problem(["backend.base_url=http://gpu-7:8000/v1", "stage=plan"]) is None


@pytest.mark.parametrize(
    "value, is_key",
    [
        ("OPENAI_API_KEY", False),
        ("HF_TOKEN", False),
        ("MY_ENDPOINT_KEY_2", False),
        ("XAI_API_KEY", False),
        (KEY, True),
        ("sk_live_0123456789abcdefABCD", True),
        ("AKIAIOSFODNN7EXAMPLE", True),  # an AWS access key id: upper case, a name's shape
        ("abcdef0123456789abcdef01", True),
        ("hf_AbCdEfGhIjKlMnOpQrSt", True),
    ],
)
def test_a_key_given_as_api_key_env_is_refused_a_variable_name_is_not(value, is_key):
    problem = argv_problem([f"backend.api_key_env={value}"])
    assert (problem is not None) == is_key
    if is_key:
        assert problem.startswith("backend.api_key_env looks like a key") and value not in problem
    assert (argv_problem([f"task.extractor.api_key_env={value}"]) is not None) == is_key


def test_redact_files_replaces_every_copy(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(f"a: http://u:{KEY}@h/v1\nb: {KEY}\n")
    assert redact_files([path, tmp_path / "absent.yaml"], [f"u:{KEY}", KEY]) == [path]
    assert path.read_text() == f"a: http://{REDACTED}@h/v1\nb: {REDACTED}\n"


def _files_holding(root: Path, text: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path)}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline",
            "stage=plan",
            f"output_root={tmp_path / 'out'}",
            f"wandb.dir={tmp_path}",
            *args,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize(
    "override",
    [
        f"backend.base_url=http://user:{KEY}@127.0.0.1:9/v1",
        f"backend.base_url=http://127.0.0.1:9/v1#api_key={KEY}",
        f"backend.api_key_env={KEY}",
        f"task.extractor.base_url=https://api.example.com/v1?api_key={KEY}",
        f"+backend.base_url=http://{KEY}@127.0.0.1:9/v1",
    ],
)
def test_a_key_in_a_url_override_is_refused_before_hydra_writes_anything(tmp_path, override):
    done = _cli(tmp_path, override)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "holds credentials inside a URL" in done.stderr or "looks like a key" in done.stderr
    assert KEY not in done.stderr + done.stdout
    assert _files_holding(tmp_path, KEY) == []


@pytest.mark.parametrize(
    "setting, said",
    [
        (
            f"base_url: http://u:{KEY}@h:9/v1",
            "backend.base_url holds credentials inside a URL (for host h)",
        ),
        (
            f"base_url: http://h:9/v1;api_key={KEY}",
            "backend.base_url holds credentials inside a URL",
        ),
        (f"api_key_env: {KEY}", "backend.api_key_env looks like a key"),
    ],
)
def test_a_key_in_a_config_file_is_refused_and_the_saved_configs_redacted(tmp_path, setting, said):
    """Hydra saves the composed config before the app runs: the copies are redacted."""
    mine = tmp_path / "mine" / "experiment"
    mine.mkdir(parents=True)
    (mine / "leaky.yaml").write_text(
        f"# @package _global_\nexperiment: leaky\nbackend:\n  {setting}\n"
    )
    done = _cli(tmp_path, f"hydra.searchpath=[file://{tmp_path / 'mine'}]", "experiment=leaky")
    assert done.returncode == 2, done.stderr[-2000:]
    assert said in done.stdout + done.stderr
    assert KEY not in done.stderr + done.stdout
    written = [p for p in (tmp_path / "out").rglob("*.yaml")]
    assert written, "Hydra wrote its run folder"  # so the redaction below was tested
    assert _files_holding(tmp_path / "out", KEY) == []
    assert any(REDACTED in p.read_text() for p in written)


@pytest.mark.parametrize("value", [f"h:8000/v1?api_key={KEY}", f"//h:8000/v1?api_key={KEY}"])
def test_a_url_setting_written_without_its_scheme_is_read_as_a_url(value):
    problem = argv_problem([f"backend.base_url={value}"])
    assert problem.startswith("backend.base_url holds credentials inside a URL (for host h)")
    assert KEY not in problem


def test_the_scorer_refuses_a_key_in_an_override_without_echoing_it(tmp_path, capsys):
    from pipeline.scorer import cli

    data = tmp_path / "in.jsonl"
    data.write_text('{"responses": ["Paris"]}\n')
    rc = cli.main(
        [str(data), "--task", "classes", f"task.extractor.base_url=http://h:8000/v1?api_key={KEY}"]
    )
    err = capsys.readouterr().err
    assert rc == 2 and KEY not in err
    assert err.strip() == (
        "error: task.extractor.base_url holds credentials inside a URL (for "
        "host h): Hydra would save them with the run's configs. Remove them "
        "from the URL and export the key in the variable named by "
        "backend.api_key_env / task.extractor.api_key_env"
    )
