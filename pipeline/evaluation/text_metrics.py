"""Free-text quality metrics of the paper: COMET (WMT19 fi-en) and AlignScore (CNN/DM).

Both wrap the reference implementations; heavy libraries are imported inside the functions.

* ``comet_scores`` runs unbabel-comet 2.2.7 (``download_model`` + ``load_from_checkpoint`` +
  ``predict``). ``model`` is a hub name (``Unbabel/wmt22-comet-da``, needs the hub or its HF
  cache; at ``revision``, None: the latest commit) or a local checkpoint: a ``.ckpt`` file or
  a folder holding ``checkpoints/model.ckpt`` and ``hparams.yaml``.
* ``alignscore_scores`` runs lm-polygraph 0.7.0's port of AlignScore
  (``lm_polygraph.generation_metrics.alignscore_utils``: ``BERTAlignModel`` and
  ``Inferencer``) on a local AlignScore checkpoint (``AlignScore-large.ckpt`` with
  ``model="roberta-large"`` in the paper; its config and tokenizer at ``revision``).

Why lm-polygraph's port rather than ``alignscore-speedofmagic``: it is already in the main
environment (the latter pins protobuf<=3.20.3 against unbabel-comet's protobuf>=4.24.4 and
would need ``--no-deps``), it loads the checkpoint with plain ``torch.load`` instead of
Lightning's ``load_from_checkpoint`` hparams machinery, and its model/inference code is the
same AlignScore code. Both construct a spaCy ``en_core_web_sm`` pipeline at start-up that
only the SMART modes use; spaCy models are not on PyPI (lm-polygraph even tries a
``pip install`` from GitHub), so the inferencer here is built without it (``nli_sp``, the
paper's mode, and every other non-SMART mode are supported; SMART modes are rejected).

Sentence splitting (the ``*_sp`` modes split context and claim into sentences): the reference
uses ``nltk.sent_tokenize`` (Punkt, data package ``punkt_tab``, a download). With
``sentence_splitter="auto"`` that is used when the data is installed (``python -m
nltk.downloader punkt_tab``); otherwise an offline Punkt tokenizer with a built-in list of
common English abbreviations is used and a warning is logged once. ``"nltk"`` insists on the
reference tokenizer, ``"offline"`` always uses the fallback.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

# Config keys named in error messages (pipeline/config.py, conf/experiment/paper.yaml).
COMET_MODEL_KEY = "metrics.comet.model"
ALIGNSCORE_CKPT_KEY = "metrics.alignscore.ckpt"
ALIGNSCORE_MODEL_KEY = "metrics.alignscore.model"

ALIGNSCORE_MODES = ("nli_sp", "bin_sp", "reg_sp", "nli", "bin", "reg")

_CACHE_LOCK = threading.Lock()
_WARNED_FALLBACK = False
_COMET_CACHE: dict[str, Any] = {}
_ALIGNSCORE_CACHE: dict[tuple, Any] = {}


def clear_model_cache() -> None:
    """Forget every loaded COMET/AlignScore model (frees memory; next call reloads)."""
    with _CACHE_LOCK:
        _COMET_CACHE.clear()
        _ALIGNSCORE_CACHE.clear()


def _check_texts(name: str, texts: Sequence[str], n: int | None) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise TypeError(
            f"{name} must be a sequence of strings, not a single {type(texts).__name__}"
        )
    texts = list(texts)
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise TypeError(
            f"{name}[{bad[0]}] is {type(texts[bad[0]]).__name__}, expected str "
            f"({len(bad)} non-string entries)"
        )
    if n is not None and len(texts) != n:
        raise ValueError(
            f"{name} has {len(texts)} entries but the first argument has {n}; "
            "pass one entry per segment"
        )
    return texts


# ---------------------------------------------------------------------------------------------
# COMET
# ---------------------------------------------------------------------------------------------


def resolve_comet_checkpoint(model: str | os.PathLike, revision: str | None = None) -> Path:
    """Local ``model.ckpt`` of ``model``: a .ckpt file, a COMET folder, or a hub name.

    Hub names go through ``comet.download_model`` (HF cache first when ``HF_HUB_OFFLINE=1``);
    one at a pinned ``revision`` through ``snapshot_download(revision=)``, which COMET's
    ``download_model`` does not take (the same call otherwise).
    """
    path = Path(model).expanduser()
    if path.is_file():
        return path.resolve()
    if path.is_dir():
        ckpt = path / "checkpoints" / "model.ckpt"
        if not ckpt.is_file():
            raise FileNotFoundError(
                f"COMET folder {path} has no checkpoints/model.ckpt; set {COMET_MODEL_KEY} to a "
                "folder laid out like a hub download (hparams.yaml + checkpoints/model.ckpt) or "
                "to the .ckpt file itself"
            )
        return ckpt.resolve()
    looks_like_path = str(model).startswith((".", "/", "~")) or str(model).endswith(".ckpt")
    if looks_like_path or str(model).count("/") != 1:
        raise FileNotFoundError(
            f"COMET checkpoint {model!r} does not exist; set {COMET_MODEL_KEY} to a local "
            "checkpoint (folder with checkpoints/model.ckpt, or the .ckpt) or a hub name such as "
            "'Unbabel/wmt22-comet-da'"
        )
    from comet import download_model

    try:
        if revision is not None:
            from huggingface_hub import snapshot_download

            folder = snapshot_download(
                repo_id=str(model), revision=str(revision), local_files_only=_hub_offline()
            )
            return (Path(folder) / "checkpoints" / "model.ckpt").resolve()
        return Path(download_model(str(model), local_files_only=_hub_offline())).resolve()
    except Exception as error:  # comet turns every hub failure into KeyError
        raise FileNotFoundError(
            f"could not fetch COMET model {model!r} from the HuggingFace hub or its cache "
            f"(HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE', 'unset')}): {error!r}. "
            f'Download it where the hub is reachable (python -c "import comet; '
            f"comet.download_model('{model}')\"), or set {COMET_MODEL_KEY} to a local "
            "checkpoint folder"
        ) from error


def load_comet_model(
    model: str | os.PathLike = "Unbabel/wmt22-comet-da", revision: str | None = None
) -> Any:
    """Load (once per checkpoint path) and return the COMET model in eval mode."""
    ckpt = resolve_comet_checkpoint(model, revision)
    key = str(ckpt)
    with _CACHE_LOCK:
        if key not in _COMET_CACHE:
            from comet import load_from_checkpoint

            if not (ckpt.parents[1] / "hparams.yaml").is_file():
                raise FileNotFoundError(
                    f"{ckpt.parents[1] / 'hparams.yaml'} is missing: COMET reads the model class "
                    f"from it; set {COMET_MODEL_KEY} to a complete checkpoint folder"
                )
            loaded = load_from_checkpoint(str(ckpt), local_files_only=_hub_offline())
            loaded.eval()
            _COMET_CACHE[key] = loaded
        return _COMET_CACHE[key]


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false", "False")


def comet_scores(
    sources: Sequence[str],
    hypotheses: Sequence[str],
    references: Sequence[str],
    model: str | os.PathLike = "Unbabel/wmt22-comet-da",
    batch_size: int = 16,
    gpus: int = 0,
    revision: str | None = None,
) -> list[float]:
    """Segment-level COMET scores (higher = better), one per (source, hypothesis, reference).

    ``model``: hub name (at ``revision``) or local checkpoint (see module doc); loaded once per
    path.
    ``gpus=0`` runs on CPU. Empty input gives ``[]``.
    """
    sources = _check_texts("sources", sources, None)
    hypotheses = _check_texts("hypotheses", hypotheses, len(sources))
    references = _check_texts("references", references, len(sources))
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if gpus < 0:
        raise ValueError(f"gpus must be >= 0, got {gpus}")
    comet_model = load_comet_model(model, revision)
    if not sources:
        return []
    samples = [{"src": s, "mt": h, "ref": r} for s, h, r in zip(sources, hypotheses, references)]
    # Lightning logs "GPU available..." on every Trainer; keep the pipeline's logs readable.
    for name in (
        "pytorch_lightning",
        "lightning",
        "lightning.pytorch",
        "lightning_fabric",
        "pytorch_lightning.utilities.rank_zero",
    ):
        logging.getLogger(name).setLevel(logging.WARNING)
    prediction = comet_model.predict(
        samples, batch_size=batch_size, gpus=gpus, progress_bar=False, num_workers=0
    )
    return [float(s) for s in prediction.scores]


# ---------------------------------------------------------------------------------------------
# AlignScore
# ---------------------------------------------------------------------------------------------

# Abbreviations (lower case, no final period) for the offline Punkt fallback, so that
# "Dr. Smith" or "5 p.m. on Monday" are not split; Punkt's trained English model knows these.
_ABBREVIATIONS = (
    "mr",
    "mrs",
    "ms",
    "dr",
    "prof",
    "sr",
    "jr",
    "st",
    "mt",
    "ft",
    "gen",
    "gov",
    "sen",
    "rep",
    "col",
    "lt",
    "sgt",
    "capt",
    "cmdr",
    "adm",
    "rev",
    "hon",
    "pres",
    "vs",
    "etc",
    "e.g",
    "i.e",
    "a.m",
    "p.m",
    "u.s",
    "u.k",
    "u.n",
    "e.u",
    "inc",
    "ltd",
    "co",
    "corp",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "no",
    "nos",
    "fig",
    "al",
    "approx",
    "dept",
    "est",
    "univ",
    "ave",
    "blvd",
    "rd",
)


def make_sentence_splitter(kind: str = "auto") -> tuple[Callable[[str], list[str]], str]:
    """Return ``(split, name)``: the sentence splitter for AlignScore's ``*_sp`` modes.

    ``auto``: NLTK's trained Punkt (``sent_tokenize``) when its data is installed, else the
    offline fallback; ``nltk``: require the NLTK data; ``offline``: always the fallback.
    """
    if kind not in ("auto", "nltk", "offline"):
        raise ValueError(f"sentence_splitter must be 'auto', 'nltk' or 'offline', got {kind!r}")
    if kind in ("auto", "nltk"):
        import nltk

        try:
            nltk.data.find("tokenizers/punkt_tab/english/")
        except LookupError:
            if kind == "nltk":
                raise LookupError(
                    "NLTK Punkt data 'punkt_tab' is not installed; run `python -m nltk.downloader "
                    "punkt_tab` where the network is reachable (or copy nltk_data/ here), or use "
                    "sentence_splitter='offline'"
                ) from None
        else:
            return nltk.sent_tokenize, "nltk.sent_tokenize"
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    global _WARNED_FALLBACK
    if kind == "auto" and not _WARNED_FALLBACK:
        _WARNED_FALLBACK = True
        logger.warning(
            "NLTK 'punkt_tab' data not installed: AlignScore splits sentences with an "
            "offline Punkt tokenizer (built-in abbreviations); install the data with "
            "`python -m nltk.downloader punkt_tab` for the reference splitter"
        )
    params = PunktParameters()
    params.abbrev_types = set(_ABBREVIATIONS)
    tokenizer = PunktSentenceTokenizer(params)
    return tokenizer.tokenize, "offline_punkt"


def _build_alignscore_inferencer(ckpt_path: Path, model: str, batch_size: int, device: str):
    """lm-polygraph's AlignScore ``Inferencer`` without the spaCy model (SMART modes only)."""
    import torch
    from lm_polygraph.generation_metrics.alignscore_utils import BERTAlignModel, Inferencer
    from transformers import AutoConfig, AutoTokenizer

    class OfflineInferencer(Inferencer):
        """Same state as ``Inferencer.__init__`` minus ``spacy.load('en_core_web_sm')``."""

        def __init__(self) -> None:
            self.device = device
            # using_pretrained=False: the architecture comes from the config and every weight
            # from the checkpoint (checked below), so the base weights need not be fetched.
            self.model = BERTAlignModel(model=model, using_pretrained=False)
            # The AlignScore checkpoint is a Lightning pickle (not weights-only); only load
            # checkpoints you trust.
            checkpoint = torch.load(ckpt_path, map_location="cpu", weights_only=False)
            state_dict = checkpoint.get("state_dict", checkpoint)
            result = self.model.load_state_dict(state_dict, strict=False)
            missing = [k for k in result.missing_keys if not k.endswith("position_ids")]
            if missing:
                raise ValueError(
                    f"AlignScore checkpoint {ckpt_path} does not fit model {model!r}: "
                    f"{len(missing)} weights missing (e.g. {missing[:3]}); set "
                    f"{ALIGNSCORE_MODEL_KEY} to the checkpoint's base model (roberta-large for "
                    "AlignScore-large.ckpt, roberta-base for AlignScore-base.ckpt)"
                )
            self.model = self.model.to(self.device)
            self.model.eval()
            self.batch_size = batch_size
            self.config = AutoConfig.from_pretrained(model)
            self.tokenizer = AutoTokenizer.from_pretrained(model)
            if self.tokenizer.model_max_length > 100_000:
                raise ValueError(
                    f"tokenizer of {model!r} has no model_max_length; AlignScore pads "
                    "to it: set model_max_length in its tokenizer_config.json"
                )
            self.spacy = None
            self.loss_fct = torch.nn.CrossEntropyLoss(reduction="none")
            self.softmax = torch.nn.Softmax(dim=-1)
            self.smart_type = "smart-n"
            self.smart_n_metric = "f1"
            self.disable_progress_bar_in_inference = True
            self.nlg_eval_mode = None
            self.verbose = False

    return OfflineInferencer()


def load_alignscore_model(
    ckpt_path: str | os.PathLike,
    model: str = "roberta-large",
    batch_size: int = 16,
    device: str = "cpu",
    revision: str | None = None,
) -> Any:
    """Load (once per checkpoint, base model, revision, batch size, device) the AlignScore
    inferencer."""
    if ckpt_path is None or str(ckpt_path) == "":
        raise FileNotFoundError(
            f"no AlignScore checkpoint configured; set {ALIGNSCORE_CKPT_KEY} to a local "
            "AlignScore-large.ckpt (https://huggingface.co/yzha/AlignScore)"
        )
    path = Path(ckpt_path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(
            f"AlignScore checkpoint {str(ckpt_path)!r} does not exist; set {ALIGNSCORE_CKPT_KEY} "
            "to a local AlignScore-large.ckpt (download it once from "
            "https://huggingface.co/yzha/AlignScore where the hub is reachable)"
        )
    if "roberta" not in str(model).lower():
        # BERTAlignModel picks its architecture by substring of the model name.
        raise ValueError(
            f"{ALIGNSCORE_MODEL_KEY}={model!r}: AlignScore checkpoints are RoBERTa "
            "models; use 'roberta-large', 'roberta-base' or a local folder whose "
            "name contains 'roberta'"
        )
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    key = (str(path.resolve()), str(model), revision, batch_size, device)
    with _CACHE_LOCK:
        if key not in _ALIGNSCORE_CACHE:
            base = str(model) if revision is None else alignscore_base_folder(model, revision)
            _ALIGNSCORE_CACHE[key] = _build_alignscore_inferencer(
                path.resolve(), base, batch_size, device
            )
        return _ALIGNSCORE_CACHE[key]


def alignscore_base_folder(model: str, revision: str) -> str:
    """The local folder of AlignScore's base model (its config and tokenizer: the weights come
    from the checkpoint) at `revision`: lm-polygraph's BERTAlignModel loads the config by name
    alone, so a pinned revision reaches it as the snapshot folder (whose path keeps the name's
    "roberta", which picks the architecture)."""
    from huggingface_hub import snapshot_download

    return snapshot_download(
        repo_id=str(model),
        revision=str(revision),
        allow_patterns=["*.json", "*.txt"],
        local_files_only=_hub_offline(),
    )


def _sentence_chunks(split: Callable[[str], list[str]], premise: str) -> list[str]:
    """Premise sentences joined into chunks of about 350 words (AlignScore's chunking)."""
    sentences = split(premise) or [""]
    n_chunk = len(premise.strip().split()) // 350 + 1
    n_chunk = max(len(sentences) // n_chunk, 1)
    return [" ".join(sentences[i : i + n_chunk]) for i in range(0, len(sentences), n_chunk)]


def _score_split(
    inferencer: Any, split: Callable[[str], list[str]], mode: str, premise: str, hypo: str
) -> float:
    """One example in a ``*_sp`` mode: ``Inferencer.inference_per_example`` with ``split``.

    Score every (premise chunk, claim sentence) pair, take the max over chunks for each claim
    sentence, average over claim sentences.
    """
    chunks = _sentence_chunks(split, premise)
    claims = split(hypo)
    if not claims:  # the reference would fail on an empty claim; "(empty)" as lm-polygraph
        claims = ["(empty)"]
    pairs_premise = [c for c in chunks for _ in claims]
    pairs_hypo = [s for _ in chunks for s in claims]
    reg, binary, tri = inferencer.inference(pairs_premise, pairs_hypo)
    scores = {"nli_sp": tri[:, 0], "bin_sp": binary, "reg_sp": reg}[mode]
    return float(scores.view(len(chunks), len(claims)).max(dim=0).values.mean().item())


# size: a public keyword API: AlignScore's own settings (model, mode, batch size, device,
# splitter, revision) by name, as the aux-model factory and the tests pass them; they go no
# further than load_alignscore_model and the scoring loop here
def alignscore_scores(
    contexts: Sequence[str],
    claims: Sequence[str],
    ckpt_path: str | os.PathLike,
    model: str = "roberta-large",
    evaluation_mode: str = "nli_sp",
    batch_size: int = 16,
    device: str = "cpu",
    sentence_splitter: str = "auto",
    revision: str | None = None,
) -> list[float]:
    """AlignScore of each claim given its context (higher = more consistent), in [0, 1].

    ``evaluation_mode``: ``nli_sp`` (paper, AlignScore's default), ``bin_sp``, ``reg_sp``
    (split into sentences) or ``nli``/``bin``/``reg`` (whole texts). Empty context or claim
    strings are scored as the text ``"(empty)"``, as lm-polygraph does. ``revision``: the base
    model's hub revision (None: its latest commit).
    """
    contexts = _check_texts("contexts", contexts, None)
    claims = _check_texts("claims", claims, len(contexts))
    if evaluation_mode not in ALIGNSCORE_MODES:
        raise ValueError(
            f"evaluation_mode must be one of {ALIGNSCORE_MODES} (SMART modes need "
            f"spaCy's en_core_web_sm and are not supported), got {evaluation_mode!r}"
        )
    split, _ = make_sentence_splitter(sentence_splitter)
    inferencer = load_alignscore_model(
        ckpt_path, model=model, batch_size=batch_size, device=device, revision=revision
    )
    if not contexts:
        return []
    contexts = [c if c.strip() else "(empty)" for c in contexts]
    claims = [c if c.strip() else "(empty)" for c in claims]
    import torch

    with torch.no_grad():
        if evaluation_mode.endswith("_sp"):
            return [
                _score_split(inferencer, split, evaluation_mode, c, h)
                for c, h in zip(contexts, claims)
            ]
        inferencer.nlg_eval_mode = evaluation_mode
        try:
            return [float(x) for x in inferencer.inference(contexts, claims)[1]]
        finally:
            inferencer.nlg_eval_mode = None
