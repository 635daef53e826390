"""The shared Transformer core: masks, positional encodings, attention, layers and stacks;
and what both commands share: devices, precision, checkpoint files and output folders.

Mask convention (everywhere): boolean, **True means "may attend"**.
"""

from .attention import KVCache, MultiHeadAttention, scaled_dot_product_attention
from .checkpoint import CheckpointError, atomic_write, content_digest, load_checkpoint, save_checkpoint
from .config import LayerConfig, StackConfig
from .device import resolve_device
from .dropout import Dropout, dropout
from .feedforward import FeedForward
from .layers import Decoder, DecoderLayer, Encoder, EncoderLayer, LayerCache, StackCache
from .masks import causal_mask, combine_masks, local_causal_mask, padding_mask
from .outputs import MANIFEST, OutputError, OutputFolder, check_output, check_output_file, remove_own_file
from .positions import (
    LearnedPositionalEncoding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    sinusoidal_table,
)
from .precision import PRECISIONS, autocast, resolve_precision

__all__ = [
    "Decoder",
    "DecoderLayer",
    "Dropout",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "KVCache",
    "LayerCache",
    "LayerConfig",
    "LearnedPositionalEncoding",
    "MultiHeadAttention",
    "RotaryEmbedding",
    "SinusoidalPositionalEncoding",
    "StackCache",
    "StackConfig",
    "causal_mask",
    "combine_masks",
    "dropout",
    "local_causal_mask",
    "padding_mask",
    "load_checkpoint",
    "save_checkpoint",
    "CheckpointError",
    "content_digest",
    "atomic_write",
    "OutputError",
    "OutputFolder",
    "check_output",
    "check_output_file",
    "remove_own_file",
    "MANIFEST",
    "PRECISIONS",
    "autocast",
    "resolve_device",
    "resolve_precision",
    "scaled_dot_product_attention",
    "sinusoidal_table",
]
