"""Pure image bytes: inspection, chroma key, metadata containers, ids, base64.

No I/O beyond the bytes handed in, no configuration: functions that take bytes and bounds
and return bytes or facts. Decoding and pixel work may block; callers on the event loop run
it in a worker thread (each module offers ``a*`` wrappers where the work is heavy).
"""
