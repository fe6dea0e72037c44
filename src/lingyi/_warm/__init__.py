"""The warm fork server of ``lingyi verify`` (POSIX only; issue 10).

A fresh ``lingyi verify`` spends most of its half second importing pydantic, the models and
the checks and loading the policies, before it does the few milliseconds of work. A process
that has done all that once (:mod:`.server`, started in the background by the first call)
forks a child per call; the child takes over the caller's stdin, stdout and stderr (passed
over a Unix socket), its working directory, environment and arguments, runs the ordinary
command line, and sends back the exit code (:mod:`.client`). Output, exit codes and log
records are those of a fresh process; policy sets are reused only while every file they were
read from is unchanged (:mod:`.policies`).

This package imports only the standard library until a child runs the command: the client
must cost no more than the interpreter's own start.
"""

# Set by a verify whose config says ``[cli] warm = false``: the in-process call starts no
# warm process, and a warm process's child tells its parent to exit after the call.
declined = False
