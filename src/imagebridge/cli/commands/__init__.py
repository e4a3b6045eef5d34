"""Command-line definitions (typer signatures only; bodies import their work lazily)."""
