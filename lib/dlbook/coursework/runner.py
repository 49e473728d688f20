"""Execute one grading notebook cell by cell, in its own process (used by the grader).

Usage: ``python runner.py GRADING.ipynb EXECUTED.ipynb PROGRESS.jsonl CELL_TIMEOUT CWD``

Writes one JSON line per event to PROGRESS.jsonl (kernel pid, cell started,
cell finished with its status: ok, error, timeout, stuck, dead or
runner-error). This file is trusted: it is written here, outside the kernel
that runs the submission. It imports only the standard library, nbformat and
nbclient (not dlbook, so it does not pay for importing torch), and it is
run by path, so nothing of this package shadows other modules.
"""
from __future__ import annotations

import json
import sys
import time

#: ename of the error nbclient reports for a cell that hit its time limit.
TIMEOUT_ENAME = "DlbookCellTimeout"
#: Time limit of the trusted cells (preamble, setup): imports can be slow on a busy machine.
TRUSTED_CELL_TIMEOUT = 120
#: How long an interrupted kernel gets to answer again before it counts as stuck.
PROBE_TIMEOUT = 5
#: Metadata key that tells the runner which role a grading-notebook cell plays.
ROLE_KEY = "dlbook_grader"


def run(nb_path, out_path, progress_path, cell_timeout, cwd) -> int:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    cell_timeout = int(cell_timeout)
    nb = nbformat.read(nb_path, as_version=4)
    progress = open(progress_path, "a", encoding="utf-8", buffering=1)

    def log(**record):
        progress.write(json.dumps(record) + "\n")
        progress.flush()

    replies = {}

    def on_executed(cell, cell_index, execute_reply):
        replies[cell_index] = execute_reply

    def timeout_func(cell):
        role = cell.metadata.get(ROLE_KEY, {}).get("role")
        return max(cell_timeout, TRUSTED_CELL_TIMEOUT) if role in ("preamble", "setup") else cell_timeout

    client = NotebookClient(
        nb, kernel_name="python3", timeout=PROBE_TIMEOUT, timeout_func=timeout_func,
        allow_errors=True, interrupt_on_timeout=True, shutdown_kernel="immediate",
        error_on_timeout={"ename": TIMEOUT_ENAME, "evalue": f"cell ran longer than {cell_timeout} s",
                          "traceback": []},
        on_cell_executed=on_executed, record_timing=False, startup_timeout=120,
        iopub_timeout=2, shell_timeout_interval=1,
        resources={"metadata": {"path": cwd}})
    with client.setup_kernel(cwd=cwd):
        provisioner = getattr(client.km, "provisioner", None)
        pid = getattr(provisioner, "pid", None) or getattr(getattr(provisioner, "process", None), "pid", None)
        log(event="kernel", pid=pid)
        for index, cell in enumerate(nb.cells):
            log(event="start", index=index)
            started = time.monotonic()
            try:
                client.execute_cell(cell, index)
            except DeadKernelError:
                log(event="cell", index=index, status="dead", seconds=round(time.monotonic() - started, 3))
                break
            except Exception as err:  # an nbclient failure: report it, never hang
                log(event="cell", index=index, status="runner-error", ename=type(err).__name__,
                    evalue=str(err)[:500], seconds=round(time.monotonic() - started, 3))
                break
            content = (replies.pop(index, None) or {}).get("content", {})
            status = content.get("status", "ok")
            record = {"event": "cell", "index": index, "seconds": round(time.monotonic() - started, 3)}
            if status == "error":
                status = "timeout" if content.get("ename") == TIMEOUT_ENAME else "error"
                record.update(ename=str(content.get("ename", ""))[:100],
                              evalue=str(content.get("evalue", ""))[:500])
            if status == "timeout":
                # The kernel was interrupted; if it does not answer now, it is stuck (in C code,
                # or ignoring SIGINT): stop, and the grader goes on in a fresh kernel.
                try:
                    msg_id = client.kc.execute("pass", store_history=False, silent=True)
                    if client.wait_for_reply(msg_id) is None:
                        status = "stuck"
                except DeadKernelError:
                    status = "stuck"
            log(status=status, **record)
            if status == "stuck":
                break
        else:
            log(event="done")
    try:
        nbformat.write(nb, out_path)
    except Exception:  # the executed notebook is only for debugging
        pass
    return 0


if __name__ == "__main__":
    sys.exit(run(*sys.argv[1:6]))
