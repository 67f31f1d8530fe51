"""
python -m explorer (from the repository root): serves the AD-DROP explorer on this machine only (127.0.0.1) and
prints its address. Needs gradio, an optional dependency: pip install gradio.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: addrop, model, ...

from support import cpu

cpu.fair_share()  # before torch loads OpenMP: the explorer mostly waits, and shares a busy laptop's cores fairly


def main():
    ap = argparse.ArgumentParser(prog="python -m explorer", description="Serves the AD-DROP explorer on "
                                 "http://127.0.0.1 (this machine only); Ctrl-C stops it.")
    ap.add_argument("--model", default="", help="a train.py output folder (default: the tutorial's, "
                    "runs/tutorial/model, else the pretrained all-MiniLM-L6-v2 with a fresh head)")
    ap.add_argument("--port", type=int, default=None, help="the port (default: 7860, or the next free one)")
    ap.add_argument("--open", action="store_true", help="open the page in the default browser")
    args = ap.parse_args()
    try:
        from explorer import app
    except ImportError as e:
        sys.exit(f"the explorer needs gradio ({e}): pip install gradio")
    try:
        app.launch(app.build(args.model), server_name="127.0.0.1", server_port=args.port, inbrowser=args.open)
    except OSError as e:  # the port is taken: said in a line
        sys.exit(f"python -m explorer: {e}")


if __name__ == "__main__":
    main()
