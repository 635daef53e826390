"""seq2seq: the shared Transformer core (:mod:`seq2seq.core`) and an encoder-decoder
translation model built on it."""

__version__ = "0.1.0"
