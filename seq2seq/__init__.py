"""seq2seq: the shared Transformer core (:mod:`seq2seq.core`) and an encoder-decoder
translation model built on it."""

__version__ = "0.1.0"


def __getattr__(name: str):
    # Lazy, so that ``import seq2seq.core`` (the forecaster's path) does not load the
    # translation stack (tokenizers, sacrebleu).
    if name in ("Transformer", "TransformerConfig"):
        from . import model

        return getattr(model, name)
    raise AttributeError(f"module 'seq2seq' has no attribute {name!r}")
