"""Chroma-key background removal with the original's exact integer arithmetic.

A provider without native alpha is asked to paint the subject on a flat key colour;
this package turns that colour into transparency. The per-pixel rules are
integer-only, so every result is reproducible bit for bit. They are
evaluated with numpy over blocks of pixels: everything that depends on a single
8-bit quantity (distance → soft alpha, (key strength, non-key strength) → dominance
alpha, (matte, source alpha) → final alpha) is a precomputed lookup table, so the
vectorised kernel is a handful of table look-ups and min/max passes per block.

- :mod:`.keys`: the key colour and the matte options; choosing a key for a prompt or
  sampling the one a provider painted from an image's border.
- :mod:`.tables`: the lookup tables of one set of options.
- :mod:`.kernel`: the matte applied to RGBA pixel arrays, block by block.
- :mod:`.alpha`: counting a matte's transparent, partial and opaque pixels and refusing an
  unusable one.
- :mod:`.images`: whole encoded images: decode, key, validate, re-encode, verify.

Pixel work is CPU-bound: call the ``a*`` wrappers from async code (worker thread).
Failures raise ``BridgeError(code=artifact, details.stage=transparent_background)``;
decoding failures keep the ``input`` code of :mod:`imagebridge.imaging.inspect`.
"""
