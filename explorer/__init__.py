"""The AD-DROP explorer: session.py computes (the project's functions only), app.py draws (gradio);
`python -m explorer` serves it."""
