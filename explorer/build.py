"""
The tutorial's model, built by the explorer on its first start: a fresh clone has no runs/tutorial/model/, and
without it the page could only show the pretrained model with a freshly initialised head, whose predictions mean
nothing. `start` runs train.py with tutorial.ipynb's own flags (one plain epoch of all-MiniLM-L6-v2 on 2000 SST-2
sentences, cut at 64 tokens) in a child process, prints its lines in the terminal and keeps them for the page.
It trains into a side folder and renames it into place only once train.py has finished, so that a build cut short
(Ctrl-C) never leaves a half-written model to be loaded. tutorial.ipynb then loads the model instead of training
it again: its check compares every flag that changes the model (settings.RESUME_FREE lists those that do not).
"""

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# tutorial.ipynb's walk_flags without --out (test_explorer checks that they stay the notebook's); --log-interval
# changes no number (RESUME_FREE): a line every 5 steps of 125 gives the page a progress bar
FLAGS = ["--task", "sst2", "--limit", "2000", "--epochs", "1", "--max-len", "64", "--log-interval", "5",
         "--no-epoch-state"]
SECONDS = 70  # the build on an idle 2-core laptop CPU, as the page announces it
STEP = re.compile(r"^step (\d+)/(\d+)")


def flags(limit=None):
    """train.py's flags for the build: the tutorial's, or with `limit` a quick build on that many training and dev
    sentences, a line a step (for tests: its model is barely better than chance, and the page says how it was
    trained)."""
    out = list(FLAGS)
    if limit is not None:
        out[out.index("--limit") + 1] = str(limit)
        out[out.index("--log-interval") + 1] = "1"
        out += ["--dev-limit", str(limit)]
    return out


class Build:
    """One build of the tutorial's model into `folder`, in a child process, under way once made (see start).
    state: "running", "done" or "failed"; lines: what train.py printed so far; step, steps: its progress."""

    def __init__(self, folder, limit=None, out=sys.stdout):
        self.folder, self.limit, self.out = Path(folder), limit, out
        self.side = self.folder.with_name(self.folder.name + ".building")
        self.command = [sys.executable, "-u", "train.py", *flags(limit), "--out", str(self.side)]  # -u: unbuffered lines
        self.state, self.lines, self.step, self.steps, self.error = "running", [], 0, None, ""
        self.started, self.seconds = time.monotonic(), None
        self._done = threading.Event()
        shutil.rmtree(self.side, ignore_errors=True)  # a build cut short before
        self.what = (f"one plain epoch of all-MiniLM-L6-v2 on 2000 SST-2 sentences, as tutorial.ipynb trains it "
                     f"(about {SECONDS} s on an idle 2-core laptop CPU)" if limit is None else
                     f"a quick build on {limit} SST-2 sentences (--build-limit {limit}: a model near chance)")
        self.say(f"No trained model in {self.shown()}/: building it, {self.what}; the page shows these lines too")
        self.say("$ " + " ".join(["python", *self.command[2:]]))
        self.proc = subprocess.Popen(self.command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, text=True, bufsize=1)
        threading.Thread(target=self._follow, daemon=True).start()

    def shown(self):
        try:
            return str(self.folder.relative_to(ROOT))
        except ValueError:
            return str(self.folder)

    def say(self, line):
        print(f"[explorer build] {line}", file=self.out, flush=True)

    def _follow(self):
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            self.say(line)
            step = STEP.match(line)
            if step:
                self.step, self.steps = int(step[1]), int(step[2])
        rc = self.proc.wait()
        self.seconds = time.monotonic() - self.started
        if rc == 0 and (self.side / "model.safetensors").is_file():
            shutil.rmtree(self.folder, ignore_errors=True)  # an unfinished model of before, if any
            os.replace(self.side, self.folder)
            self.state = "done"
            self.say(f"built {self.shown()}/ in {self.seconds:.0f} s")
        else:
            said = [line.strip() for line in self.lines if line.strip()]
            self.error = f"train.py exited with {rc}" + (f": {said[-1]}" if said else "")  # its last word
            self.state = "failed"
            self.say(f"the build failed ({self.error})")
        self._done.set()

    def wait(self, timeout=None):
        """Blocks until the build ends (or `timeout` seconds); returns whether it has."""
        return self._done.wait(timeout)

    def elapsed(self):
        return self.seconds if self.seconds is not None else time.monotonic() - self.started

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()


def start(folder, limit=None, out=sys.stdout):
    """A Build of the tutorial's model into `folder`, already running."""
    return Build(folder, limit, out)
