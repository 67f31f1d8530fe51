"""The AD-DROP explorer: session.py computes (the project's functions only), draw.py draws, app.py makes the page
(gradio), build.py trains the tutorial's model on a first start; `python -m explorer` serves it."""
