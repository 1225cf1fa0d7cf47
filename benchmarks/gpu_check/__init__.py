"""The GPU check: real-size agents on a GPU, our trainers against the reference and bare torch,
and the device-only paths, in one command (``python -m benchmarks gpu``); see run.py."""
