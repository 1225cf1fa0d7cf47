"""The judge's side of a sandboxed run: a link to the worker and stand-ins for its objects.

The tests run here, in a process the generated code never runs in. Calling one of the agents'
functions sends the arguments to the worker and gets plain data (or a handle) back, so a test
compares values of exact builtin types with builtin equality, never the generated code's.
"""

import builtins
import os
import signal
import subprocess

import _verdict
import _wire

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_worker.py")


class SandboxTimeout(BaseException):
    """Raised by the judge's alarm; a BaseException so ``except Exception`` cannot swallow it."""


class WorkerGone(Exception):
    """The generated code's process ended or broke the protocol."""


class GeneratedCodeError(Exception):
    """An exception the generated code raised that has no builtin counterpart."""


def _rebuild(reply):
    # Bounded here already: the names and message are the generated code's, of any size.
    names = reply.get("raise") if type(reply.get("raise")) is list else []
    names = [_verdict.text(n, 100) for n in names[:64] if type(n) is str] or ["Exception"]
    message = _verdict.text(reply.get("message"), _verdict.LIMITS["message"])
    cls = GeneratedCodeError
    for name in names:
        found = getattr(builtins, name, None)
        if isinstance(found, type) and issubclass(found, Exception):
            cls = found
            break
    try:
        exc = cls(message)
    except TypeError:  # a builtin exception with a different constructor
        exc = GeneratedCodeError(message)
    exc.type_name = names[0]
    return exc


class Remote(_wire.Handle):
    """A stand-in for an object of the generated code; every operation is asked of the worker.

    Equality is identity and truth testing is refused, so an object cannot pass a comparison
    by defining ``__eq__`` or ``__bool__``; tests get plain data or fail.
    """

    __slots__ = ("_session", "number", "_generation")

    def __init__(self, session, number):
        object.__setattr__(self, "_session", session)
        object.__setattr__(self, "number", number)
        object.__setattr__(self, "_generation", session.generation)

    def _ask(self, op, **fields):
        return self._session.ask(self, op, **fields)

    def __call__(self, *args, **kwargs):
        return self._ask("call", args=list(args), kwargs=dict(kwargs))

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._ask("getattr", value=name)

    def __setattr__(self, name, value):
        self._ask("setattr", value=(name, value))

    def __iter__(self):
        return iter(self._ask("iter"))

    def __len__(self):
        size = self._ask("len")
        if type(size) is not int:
            raise TypeError("len() of a generated object must be an int")
        return size

    def __getitem__(self, key):
        return self._ask("getitem", value=key)

    def __contains__(self, item):
        found = self._ask("contains", value=item)
        if type(found) is not bool:
            raise TypeError("'in' on a generated object must give a bool")
        return found

    def __str__(self):
        text = self._ask("str")
        return text if type(text) is str else repr(self)

    def __repr__(self):
        return f"<object #{self.number} of the generated code>"

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    def __hash__(self):
        return hash(("remote", self.number))

    def __bool__(self):
        raise TypeError("a generated object has no trusted truth value; tests accept plain data")


class Link:
    """The judge's end of one fresh worker process.

    ``confine`` runs in the worker between fork and exec (its own session, then the worker's
    own OS layers), so the generated code never runs without them.
    """

    def __init__(self, interpreter, env, confine=None):
        replies, child_end = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [interpreter, "-I", "-S", "-B", WORKER, str(child_end)],
                stdin=subprocess.PIPE,
                stdout=2,
                stderr=2,
                pass_fds=(child_end,),
                env=env,
                preexec_fn=confine,
            )
        except BaseException:
            os.close(replies)
            raise
        finally:
            os.close(child_end)
        self.requests, self.replies = self.proc.stdin.fileno(), replies
        self.dead, self.fault = False, None

    def open(self, head):
        """Send the job head; return the worker's first answer (its names, or a setup error)."""
        try:
            _wire.send(self.requests, head)
            return _wire.receive(self.replies)
        except _wire.WireError as exc:
            self.kill()
            self.fault = "bad_reply"
            raise WorkerGone(f"the generated code's process sent a bad reply ({exc})") from None
        except OSError as exc:
            self.kill()
            raise WorkerGone(f"the generated code's process ended during setup ({exc})") from None
        except BaseException:
            self.kill()
            raise

    def ask(self, op, number, resolve, **fields):
        """Send one request and return the decoded answer, or raise what the code raised."""
        if self.dead:
            raise WorkerGone("the generated code's process is gone")
        message = {"op": op, "n": number}
        for key, value in fields.items():
            message[key] = _wire.encode(value)
        try:
            _wire.send(self.requests, message)
            reply = _wire.receive(self.replies)
        except _wire.WireError as exc:
            self.kill()
            self.fault = "bad_reply"
            raise WorkerGone(f"the generated code's process sent a bad reply ({exc})") from None
        except OSError as exc:
            self.kill()
            raise WorkerGone(f"the generated code's process stopped answering ({exc})") from None
        except BaseException:
            self.kill()  # interrupted mid-exchange (a timeout): the protocol state is lost
            raise
        if type(reply) is dict and "ok" in reply:
            try:
                return _wire.decode(reply["ok"], resolve)
            except _wire.WireError as exc:
                self.kill()
                self.fault = "bad_reply"
                raise WorkerGone(f"the generated code's process sent a bad reply ({exc})") from None
        if type(reply) is dict and "raise" in reply:
            raise _rebuild(reply)
        self.kill()
        self.fault = "bad_reply"
        raise WorkerGone("the generated code's process sent a bad reply")

    def kill(self):
        """Kill the worker and every process left in its group (it leads its own session)."""
        if self.dead:
            return
        self.dead = True
        for kill, target in ((os.killpg, self.proc.pid), (os.kill, self.proc.pid)):
            try:
                kill(target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue  # already gone (a zombie group leader is still killed by os.kill)
        self.proc.wait()
        self.proc.stdin.close()
        os.close(self.replies)


class Session:
    """The worker a run's tests talk to, restarted (setup run again) after it is killed.

    Handles to the names the setup defined stay valid across restarts (a fresh run of the same
    code defines them in the same order); other handles belong to the worker that made them.
    """

    def __init__(self, interpreter, env, head, timeout, confine=None):
        self.interpreter, self.env, self.head, self.timeout = interpreter, env, head, timeout
        self.confine, self.fault = confine, None
        self.link, self.generation, self.exported = None, 0, 0
        self._remotes, self._spare = {}, None

    def spawn(self):
        """Start the first worker (it has run no generated code yet); errors are set-up errors."""
        self._spare = Link(self.interpreter, self.env, self.confine)

    def start(self):
        """Start a worker and run the setup; return its first answer."""
        self.generation += 1
        # Handles to the setup's names carry over; the worker that made the others is gone.
        self._remotes = {n: r for n, r in self._remotes.items() if n < self.exported}
        self.link, self._spare = self._spare or Link(self.interpreter, self.env, self.confine), None
        try:
            with alarm(self.timeout):
                first = self.link.open(self.head)
        finally:
            self.fault = self.fault or self.link.fault
        if type(first) is dict and type(first.get("ready")) is dict:
            handles = first.get("handles")
            self.exported = handles if type(handles) is int else 0
        return first

    def restart_if_dead(self):
        """Before a test: a killed worker is replaced; False when the new one fails its setup."""
        if self.link is not None and not self.link.dead:
            return True
        try:
            first = self.start()
        except (WorkerGone, SandboxTimeout):
            return False
        return type(first) is dict and "ready" in first

    def remote(self, number):
        found = self._remotes.get(number)
        if found is None:
            found = self._remotes[number] = Remote(self, number)
        return found

    def ask(self, remote, op, **fields):
        stale = remote._generation != self.generation and remote.number >= self.exported
        if stale or self.link is None:
            raise WorkerGone("this object belonged to a worker that was stopped")
        try:
            return self.link.ask(op, remote.number, self.remote, **fields)
        finally:
            self.fault = self.fault or self.link.fault

    def close(self):
        """Kill the current worker (and a spare one never used)."""
        for link in (self.link, self._spare):
            if link is not None:
                link.kill()


def _on_alarm(signum, frame):
    raise SandboxTimeout("test exceeded its time limit")


class alarm:
    """Raise :class:`SandboxTimeout` in this (the judge's) process after ``seconds``."""

    def __init__(self, seconds):
        self.seconds = seconds

    def __enter__(self):
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def __exit__(self, *exc_info):
        signal.setitimer(signal.ITIMER_REAL, 0)
        return False
