"""Rendering: what the checker, the runtime and the pipeline produce, as people and tools read it
(text, JSON, CSV, SARIF), by total functions that never touch private data beyond released values."""
