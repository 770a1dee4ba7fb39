"""tacc-launcher: the one privileged step. It prepares a task's directory and runs its processes as the owner.

``tacc-launcher RUN_DIR VERB ID``, run as root (directly when the service is root, through ``sudo -n``
when it is not: ``deploy/sudoers.d/tacc-hub``), or as the service's own user for
``TaccHub.task_identity = 'service'``. It takes only a task id; everything else comes from
``RUN_DIR/ID/launch.json``, which the service wrote in its own private directory (the slurmstepd
model). Verbs: ``start`` (prepare, then supervise), ``prepare`` (only the preparation: Slurm jobs
then run as the user under slurmstepd), ``cancel`` (SIGTERM to the supervisor: the task gets its
grace period, then SIGKILL), ``kill`` (SIGKILL at once).

Threat model and invariants (docs/security.md):
- What it reads is read with the caller's identity (effective uid of the service), never root's:
  a service account cannot make it read a file it could not read itself.
- RUN_DIR and RUN_DIR/ID must be real directories owned by the caller and writable by nobody else.
- A task runs only as an account with uid >= the floor (1000, or ``min_uid`` in
  /etc/tacc-hub/launcher.json, root-owned) whose name and uid agree with the system's database.
- Directories are created by root only inside directories owned by the caller, never through a
  link; everything inside a task directory is written by the task's user (a forked child that has
  dropped root for good), so a link the user planted can only lead where the user could write.
- The supervisor stays root, so the task can neither kill it nor write what it writes: the exit
  status (``RUN_DIR/ID/exitcode``) is written after every descendant of the task has died (it is a
  subreaper: processes that ``setsid`` or double-fork stay its descendants and are killed too).

Only the standard library is imported (it starts in ~20 ms); the snapshot check is tacc_hub.snapshot's.
"""
