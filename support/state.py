"""
The run folder (--out) of train.py, and what makes a run survive a stop:

- the lock: one run at a time holds the folder (OUT/run.lock), refreshing the lock's time stamp while it runs
  (a heartbeat), so that a job requeued on another machine can tell a live run from one that was killed;
- the training state (OUT/train_state.pt) that --resume continues from, exactly: weights, optimizer, counters,
  history, every rank's random streams and, when saved inside an epoch, how far the epoch had got;
- the graceful stop: SIGTERM or SIGUSR1 (what a scheduler such as Slurm sends before it ends a job) lets the
  current step finish, then the state is saved, the lock released, and the process exits with EXIT_STOPPED.
"""

import json
import math
import os
import shlex
import signal
import socket
import sys
import threading
import time
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import torch
import torch.distributed as dist

from support import checkpoint

STATE = "train_state.pt"  # the training state, in --out
LOCK = "run.lock"         # who holds --out, in --out
HEARTBEAT = 30.0          # seconds between refreshes of the lock's modification time while its run holds it
STALE_AFTER = 300.0       # a lock from another machine not refreshed for this long belongs to a run that is gone
EXIT_STOPPED = 75         # the exit code after a stop signal: the state is saved, rerun with --resume (EX_TEMPFAIL)
WINDOWS = os.name == "nt"
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGUSR1") if hasattr(signal, n))  # Windows: no SIGUSR1


class Busy(SystemExit):
    """--out is held by another run that still runs (a sweep leaves that run to it and moves on)."""


class Stopped(SystemExit):
    """A stop signal arrived; the training state is saved. SystemExit's code is EXIT_STOPPED."""

    def __init__(self, message):
        super().__init__(EXIT_STOPPED)
        self.message = message

# -----------------------------------------------------------------------------
# the graceful stop

class StopSignals:
    """`with StopSignals() as stop:` turns SIGTERM and SIGUSR1 into a flag, stop.signum, that the training loop
    reads after every step, instead of Python's default for SIGTERM (the process ends at once, without running
    `finally` blocks: the lock stays, and everything since the last save is lost). The previous handlers come
    back at the end of the block. Signal handlers can only be set from the main thread; elsewhere (a run started
    from a thread) the flag never rises and the signals keep their handlers."""

    def __init__(self):
        self.signum = None  # the stop signal received, if any
        self.old = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for s in STOP_SIGNALS:
                self.old[s] = signal.signal(s, self._received)
        return self

    def _received(self, signum, frame):
        self.signum = signal.Signals(signum)

    def __exit__(self, *exc):
        for s, handler in self.old.items():
            signal.signal(s, handler)
        if self.signum is not None and callable(self.old.get(self.signum)):
            self.old[self.signum](self.signum, None)  # a signal that came too late to stop the block goes on
            # to the handler outside it (a sweep's, which then stops before its next run)

# -----------------------------------------------------------------------------
# one run per folder: two runs writing one --out would interleave their checkpoints, states and metrics

def lock_run_dir(out):
    """Claim out for this process: out/run.lock, created only if it is absent (O_CREAT | O_EXCL, one atomic
    step), holding who claimed it. A lock left by a run that is gone (see _gone) is taken over with a note; any
    other lock is refused in one line. Returns the handle for unlock_run_dir."""
    out = Path(out)
    unwritable = f"error: --out {out}: cannot write there ({{}}); pass a folder this user can write"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        sys.exit(unwritable.format(e.strerror or e))
    path = out / LOCK
    mine = {"pid": os.getpid(), "host": socket.gethostname(),
            "started": datetime.now().astimezone().isoformat(timespec="seconds"), "argv": sys.argv}
    for _ in range(3):  # a lock released or taken over between our tries is tried again
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            held = _read_lock(path)
            if held is None:  # released since our open
                continue
            who = f"pid {held['pid']} on {held['host']}, started {held['started']}"
            gone = _gone(held, path)
            if not gone:
                raise Busy(f"error: {path}: another run is using {out} ({who}); wait for it to finish, "
                           f"pass another --out, or delete {path} if that run is truly gone")
            print(f"{LOCK}: the run that held {out} ({who}) {gone}; taking the folder over", flush=True)
            # read again just before removing it: a run taking over at the same moment may hold it now.
            # (Two takeovers within microseconds of each other could still both win; we accept that.)
            if _read_lock(path) == held:
                path.unlink(missing_ok=True)
            continue
        except OSError as e:  # a read-only folder
            sys.exit(unwritable.format(e.strerror or e))
        with os.fdopen(fd, "w") as f:
            json.dump(mine, f)
        return path, mine
    sys.exit(f"error: {path}: other runs keep taking {out}; pass another --out")


def _read_lock(path):
    """The claim in a lock file, or None if it is gone. A lock being written this very moment (created, not
    yet filled) is read again after a pause; a file that still makes no sense is refused by name."""
    for pause in (0.05, 0.25, 1.0, None):
        try:
            held = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:  # ValueError: not UTF-8, not JSON
            why = e.strerror if isinstance(e, OSError) else f"not JSON: {e}"
        else:
            if (isinstance(held, dict) and {"pid", "host", "started"} <= held.keys()
                    and type(held["pid"]) is int and 0 < held["pid"] < 2**31):  # os.kill(0 or -n) means a group
                return held
            why = "no pid, host and start time in it"
        if pause is None:
            sys.exit(f"error: {path}: not a lock this script wrote ({why}); if no run is using "
                     f"{path.parent}, delete {path}")
        time.sleep(pause)


def _gone(held, path):
    """Why the run that wrote the lock certainly no longer runs, or "" if it may still run. On this machine:
    no process has its pid. On another machine (a folder shared between machines, as a requeued cluster job
    sees it), whose processes cannot be asked: its heartbeat, the lock's modification time, is older than
    STALE_AFTER. A pid that a new, unrelated process has taken since counts as running (delete the lock by
    hand then). On Windows the heartbeat decides on this machine too: os.kill(pid, 0) there sends Ctrl-C to the
    process group, it does not ask."""
    if held["host"] != socket.gethostname() or WINDOWS:
        try:
            age = time.time() - path.stat().st_mtime
        except FileNotFoundError:
            return "is gone"
        return f"has not refreshed its lock for {age:.0f} s (stale after {STALE_AFTER:.0f} s)" \
            if age > STALE_AFTER else ""
    try:
        os.kill(held["pid"], 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return "is gone"
    except PermissionError:  # it exists, as another user's process
        return ""
    return ""


def _is_mine(path, mine):
    try:
        return json.loads(path.read_bytes()) == mine
    except (OSError, ValueError):
        return False


def unlock_run_dir(handle):
    """Remove the lock, if it is still this run's (one that took the folder over as stale owns it now)."""
    path, mine = handle
    if _is_mine(path, mine):
        path.unlink(missing_ok=True)


def _heartbeat(path, mine, done):
    """Touch the lock every HEARTBEAT seconds until done is set, while it is still ours."""
    while not done.wait(HEARTBEAT):
        if not _is_mine(path, mine):
            print(f"warning: {path} is no longer this run's lock (taken over as stale?)", file=sys.stderr, flush=True)
            return
        try:
            os.utime(path)
        except OSError:
            pass  # a passing error of a network file system; the next beat tries again


@contextmanager
def run_lock(out):
    """`with run_lock(out):` holds out for the block, refreshing the lock's time stamp from a background thread,
    and releases it however the block ends, except by SIGKILL: the next run then finds the lock stale (on this
    machine at once, from another after STALE_AFTER) and takes the folder over."""
    made = not Path(out).exists()
    handle = lock_run_dir(out)
    done = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(*handle, done), daemon=True)
    beat.start()
    try:
        yield handle
    finally:
        done.set()
        beat.join()
        unlock_run_dir(handle)
        if made:  # a run that failed before it wrote anything leaves no folder
            try:
                Path(out).rmdir()  # only if empty
            except OSError:
                pass

# -----------------------------------------------------------------------------
# the training state, for --resume

class _WriteAll:
    """The file torch.save writes through: every byte reaches the file, or write raises the OSError (ENOSPC,
    EIO) that stopped it. Given a path or a buffered file, torch reports a full disk as a RuntimeError about
    zip offsets instead ('unexpected pos 704 vs 598'), which names neither the file nor the cause."""

    def __init__(self, f):
        self.f = f  # an unbuffered file: its write returns how many bytes reached the disk

    def write(self, b):
        b, done = memoryview(b).cast("B"), 0
        while done < len(b):  # a short write (the disk just filled) is retried, and the retry raises ENOSPC
            done += self.f.write(b[done:])
        return done

    def flush(self):
        pass


def torch_save(obj, path):
    with open(path, "wb", buffering=0) as f:
        torch.save(obj, _WriteAll(f))


def save_state(out, master, world, settings, net, opt, progress, local=None):
    """Weights, optimizer, progress (epoch, step, best, history, the epoch in progress...) and each rank's own
    part (its random streams, and local: what it gathered of the epoch in progress), written to a temporary
    name and renamed, so that a kill at any moment leaves the previous state whole. Every rank calls it (the
    parts are gathered); rank 0 writes."""
    rng = {"cpu": torch.get_rng_state()}
    if next(net.parameters()).is_cuda:
        rng["cuda"] = torch.cuda.get_rng_state(next(net.parameters()).device)
    mine = {"rng": rng, **{k: v.detach().cpu() for k, v in (local or {}).items()}}
    ranks = [mine]
    if world > 1:  # each rank drew its own dropout and masks, and holds its own share of the losses
        ranks = [None] * world
        dist.all_gather_object(ranks, {"rng": {k: v.cpu() for k, v in rng.items()}, **mine})
    if master:
        state = {"settings": settings, "world_size": world, **progress, "ranks": ranks,
                 "model": net.state_dict(), "optimizer": opt.state_dict()}
        checkpoint.atomic_write(Path(out) / STATE, lambda tmp: torch_save(state, tmp))
    if world > 1:
        dist.barrier()  # no rank runs ahead of the saved state


def load_state(out, settings, world, device):
    """The state saved by save_state in out, refused with a message if it cannot continue this run."""
    path = Path(out) / STATE
    if not path.is_file():
        sys.exit(f"error: --resume: nothing to resume: {path} does not exist (drop --resume to start the run)")
    try:
        state = torch.load(path, map_location=device, weights_only=False)
        saved = state["settings"]
    except Exception as e:  # a file we did not write, or a truncated copy of one
        sys.exit(f"error: --resume: {path} is not a training state this script wrote ({type(e).__name__}: {e})")
    diff = _differences(saved, settings)
    if "ranks" not in state:
        sys.exit(f"error: --resume: {path} holds no per-rank random streams, which this script's states hold; "
                 "it cannot be continued exactly: rerun without --resume")
    if state["world_size"] != world:
        diff.append(f"{state['world_size']} processes then, {world} now")
    if diff:
        sys.exit(f"error: --resume: {path} was made with other settings: {'; '.join(diff)}")
    return state


def _differences(then, now):
    """The settings of `now` that `then` (a saved run's) does not share, in words: '--p 0.7 then, 0.5 now'."""
    said = lambda v: "the default" if v is None else repr(v)  # noqa: E731 (a flag not given is None)
    return [f"--{k.replace('_', '-')} {said(then.get(k))} then, {said(v)} now" for k, v in now.items()
            if then.get(k) != v]


def restore_rng(rng, device):
    # load_state's map_location put these on the run's device; both setters take a CPU ByteTensor
    torch.set_rng_state(rng["cpu"].cpu())
    if device.type == "cuda" and "cuda" in rng:  # a state saved on a CPU has none: the stream stays as seeded
        torch.cuda.set_rng_state(rng["cuda"].cpu(), device)


def save(j, in_epoch=None, local=None):
    """The training state (save_state), after the last finished epoch or, with in_epoch (the epoch in
    progress: its number, the batches done, the seconds spent) and local (this rank's losses and dropped
    fraction so far), inside an epoch."""
    progress = {"epoch": j.history[-1]["epoch"] if j.history else 0, "step": j.step, "best": j.best,
                "best_epoch": j.best_epoch, "history": j.history, "best_weights": j.best_weights,
                "in_epoch": in_epoch}
    save_state(j.out, j.master, j.world, j.settings, j.net, j.opt, progress, local)
    j.saved_at = time.time()


def load_optimizer(opt, saved):
    """opt's state from a saved state_dict, keeping opt's own form (fused, or under --compile foreach with its lr
    a tensor: load_state_dict would take the saved run's), so that a run may resume with --compile changed."""
    form = [{k: g[k] for k in ("lr", "fused", "foreach", "capturable")} for g in opt.param_groups]
    opt.load_state_dict(saved)
    for g, own in zip(opt.param_groups, form):
        lr = float(g["lr"])
        g.update(own)
        if isinstance(g["lr"], torch.Tensor):
            g["lr"].fill_(lr)
        else:
            g["lr"] = lr


def resume(j):
    """With --resume: the weights, optimizer, counters, history and random streams of the saved state in
    --out, and when it was saved inside an epoch, how far that epoch had got, so the run goes on exactly as
    if it had never stopped."""
    if not j.args.resume:
        _refuse_to_overwrite(j.out, j.settings, j.say)
        return
    saved = load_state(j.out, j.settings, j.world, j.device)
    j.net.load_state_dict(saved["model"])
    load_optimizer(j.opt, saved["optimizer"])
    j.history, j.best, j.best_epoch, j.step = saved["history"], saved["best"], saved["best_epoch"], saved["step"]
    j.best_weights = saved.get("best_weights")
    j.first_epoch = saved["epoch"] + 1
    mine = saved["ranks"][j.rank]
    restore_rng(mine["rng"], j.device)
    part, where = saved.get("in_epoch"), f"epoch {saved['epoch']}"
    if j.keep_best and j.best_weights is None and j.best_epoch:  # started without --predict/--ood/--dev-once
        j.best_weights = _best_weights_of_state(j, saved, part)
    if part is not None:  # saved inside an epoch: go on with its batches left
        batches = math.ceil(len(j.splits["train"].y) / j.batch_size)
        if part["epoch"] > j.epochs:
            sys.exit(f"error: --resume: {j.out / STATE} stopped inside epoch {part['epoch']}, past --epochs "
                     f"{j.epochs}: pass --epochs {part['epoch']} or more to go on (--epochs may grow, not shrink)")
        if not 0 <= part["batches"] <= batches:
            sys.exit(f"error: --resume: {j.out / STATE}: its epoch {part['epoch']} stopped at batch "
                     f"{part['batches']}, past the end of the epoch ({batches} batches): not a state of this run")
        j.first_epoch = part["epoch"]
        j.partial = (part["batches"], list(mine["losses"].to(j.device).unbind()), mine["dropped"].to(j.device),
                     part["seconds"])
        where = f"batch {part['batches']} of epoch {part['epoch']}"
    elif j.first_epoch > j.epochs or j.step >= j.total_steps or saved["epoch"] - j.best_epoch >= j.args.patience:
        if _finished(j.out):
            sys.exit(f"error: --resume: nothing to resume: the run in {j.out} already finished "
                     f"(epoch {saved['epoch']} of {j.epochs}; raise --epochs to train longer)")
        if saved["epoch"] > j.epochs:
            sys.exit(f"error: --resume: {j.out / STATE} is the state after epoch {saved['epoch']}, past --epochs "
                     f"{j.epochs}: pass --epochs {saved['epoch']} or more (--epochs may grow, not shrink)")
        # stopped after its last epoch's state and before the final metrics.json: only that is left to do
        j.first_epoch = j.epochs + 1
    j.say(f"resuming after {where} (step {j.step}) from {j.out / STATE}")


def _best_weights_of_state(j, saved, part):
    """--predict/--ood added on --resume to a run started without them, which kept no best-epoch weights: the
    state's own weights when they are the best epoch's (saved at its end), else refused before any training."""
    if part is not None or j.best_epoch != saved["epoch"]:
        why = (f"it was saved inside epoch {part['epoch']}" if part is not None else
               f"its best epoch, {j.best_epoch}, came before its last, {saved['epoch']}")
        sys.exit(f"error: --resume with --predict/--ood: {j.out / STATE} holds no best-epoch weights (the run was "
                 f"started without --predict and --ood, which keep them, and {why}): resume without them, or rerun "
                 "from the start with them")
    return cpu_copy(saved["model"])


def cpu_copy(weights):
    """A state dict's tensors copied to the CPU: the best epoch's weights, kept apart from the training ones."""
    return {k: v.detach().to("cpu", copy=True) for k, v in weights.items()}


def _refuse_to_overwrite(out, settings, say):
    """A run started without --resume into a folder whose run stopped before it finished would overwrite that
    run's state and checkpoint: refused, saying how to continue it or start over. Into a finished run's folder:
    with that run's settings, the run is made again (a rerun of the same command, a sweep), said in a note;
    with other settings, refused: a finished result would be replaced by another experiment's."""
    if (out / STATE).is_file() and (not _finished(out) or saved_after_metrics(out)):
        sys.exit(f"error: {out} holds a run that did not finish (its state, {out / STATE}): add --resume to "
                 f"continue it, or pass another --out, or remove {out} to start over")
    if _finished(out):
        then = json.loads((out / "metrics.json").read_text()).get("args")
        if diff := _differences(then if isinstance(then, dict) else {}, settings):
            sys.exit(f"error: {out} holds a finished run made with other settings ({'; '.join(diff)}): pass "
                     f"another --out to keep both, or remove {out} to replace it")
        say(f"note: {out} holds a finished run of these settings: this run makes it again, in its place")


def saved_after_metrics(out):
    """Whether out's state was saved after its metrics.json was last written, so that metrics.json does not
    describe it: a run that finishes writes metrics.json after its last state, but a new run started into a
    finished run's folder and stopped inside its first epoch leaves its state beside the old metrics.json."""
    saved, written = out / STATE, out / "metrics.json"
    return saved.is_file() and (not written.is_file() or saved.stat().st_mtime_ns > written.stat().st_mtime_ns)


def _finished(out):
    """Whether out/metrics.json says that its run finished (absent or unreadable: no)."""
    try:
        return bool(json.loads((out / "metrics.json").read_text()).get("finished"))
    except (OSError, ValueError, AttributeError):
        return False


def stop_or_save(j):
    """After a step: whether to stop (a stop signal arrived) and whether to save the state (--save-every is
    due). Under torchrun the ranks agree, by the max over ranks, so that all stop or save after the same step
    (the scheduler's signal reaches each process at its own moment)."""
    every = j.args.save_every
    due = every is not None and (j.step % every.steps == 0 if every.steps else
                                 time.time() - j.saved_at >= every.minutes * 60)
    if j.world == 1:
        return j.stop.signum is not None, due
    # a tiny all-reduce per step, the price of agreeing; on the CPU (gloo), so that a GPU's step is not waited for
    flags = torch.tensor([j.stop.signum is not None, due], dtype=torch.int32)
    dist.all_reduce(flags, op=dist.ReduceOp.MAX)
    stop, save = flags.tolist()
    return bool(stop), bool(save)


def resume_command(world):
    """This command line with --resume, under the launcher that ran it."""
    launcher = ["torchrun", "--standalone", f"--nproc_per_node={world}"] if world > 1 else ["python"]
    argv = sys.argv if "--resume" in sys.argv else sys.argv + ["--resume"]
    return shlex.join(launcher + argv)


def stopped_message(j, epoch, done):
    why = j.stop.signum.name if j.stop.signum is not None else "a stop signal on another rank"
    return (f"stopped by {why} after step {j.step} (epoch {epoch}, batch {done}): the training state is in "
            f"{j.out / STATE}; resume with\n    {resume_command(j.world)}")


def interrupted_message(out):
    """What Ctrl-C prints: the command that resumes from the state last saved in out, if there is one."""
    if (out / STATE).is_file():
        return (f"\ninterrupted: the state last saved is in {out / STATE}; resume with\n"
                f"    {resume_command(int(os.environ.get('WORLD_SIZE', 1)))}")
    return "\ninterrupted before the first epoch finished: nothing to resume; rerun the same command"
