"""
python -m explorer (from the repository root): serves the AD-DROP explorer on this machine only (127.0.0.1) and
prints its address. Needs gradio, an optional dependency: pip install gradio. On the first start (no
runs/tutorial/model/ yet) it builds the tutorial's model first, about 70 s, the page and the terminal showing how
far it is.
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
                    "runs/tutorial/model, built on the first start)")
    ap.add_argument("--port", type=int, default=None, help="the port (default: 7860, or the next free one)")
    ap.add_argument("--open", action="store_true", help="open the page in the default browser")
    ap.add_argument("--no-build", action="store_true", help="without the tutorial's model, do not build it: show "
                    "the pretrained all-MiniLM-L6-v2 with a fresh head (the page says its predictions mean nothing)")
    ap.add_argument("--tutorial-model", default=None, metavar="DIR", help="where the tutorial's model is looked "
                    "for, and built when missing (default: runs/tutorial/model)")
    ap.add_argument("--build-limit", type=int, default=None, metavar="N", help="build on N training and N dev "
                    "sentences instead of the tutorial's 2000 (a quick build for tests: a model near chance)")
    args = ap.parse_args()
    if args.build_limit is not None and args.build_limit < 1:
        ap.error(f"--build-limit {args.build_limit}: must be at least 1")
    try:
        from explorer import app, build, session
    except ImportError as e:
        sys.exit(f"the explorer needs gradio ({e}): pip install gradio")
    if args.tutorial_model:
        session.tutorial_dir = Path(args.tutorial_model).resolve()
    if not args.model and not args.no_build and not session.tutorial_ready():
        app.BUILD = build.start(session.tutorial_dir, args.build_limit)
    try:
        app.launch(app.build(args.model), server_name="127.0.0.1", server_port=args.port, inbrowser=args.open)
    except OSError as e:  # the port is taken: said in a line
        sys.exit(f"python -m explorer: {e}")
    finally:
        if app.BUILD is not None:
            app.BUILD.stop()


if __name__ == "__main__":
    main()
