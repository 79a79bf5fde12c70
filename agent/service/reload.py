"""Putting a reloaded config in force on the running agent (SIGHUP).

What a reload can change takes effect at once: the signer, logging, queue sizes, added and
removed transports, and transports whose section changed (rebuilt, then swapped in). What it
cannot change (`metrics.listen`, `state_dir`, `control_socket`, `lineage.enabled`) is logged
as needing a restart. Any error leaves the running config whole: everything is checked and
built before the first change is made.
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from agent.config.model import AgentConfig
from agent.config.redact import redact_url
from agent.delivery.deliveries import Deliveries
from agent.delivery.pipeline import Pipeline
from agent.delivery.shaping import shaping
from agent.delivery.signing import Signer
from agent.delivery.transports.base import Transport
from agent.delivery.transports.factory import build_transports
from agent.service.preflight import Checked, check_startup
from agent.telemetry import logs

log = structlog.get_logger("agent.daemon")


def signer_of(checked: Checked) -> Signer:
    """The signer of the key the service's checks read."""
    assert checked.signing_key is not None  # the service's checks read the key or raise
    return Signer(checked.signing_key)


async def apply_config(
    old: AgentConfig, new: AgentConfig, pipeline: Pipeline, deliveries: Deliveries
) -> None:
    """Check `new`, build what it changes, then put it in force; raises (changing nothing)
    when a check or a transport fails."""
    for key, before, after in (
        ("metrics.listen", old.metrics.listen, new.metrics.listen),
        ("state_dir", old.state_dir, new.state_dir),
        # Redacted: the URL may carry a password, which no log line shows.
        ("state_url", redact_url(old.state_url), redact_url(new.state_url)),
        ("state_password_file", old.state_password_file, new.state_password_file),
        ("state_lease", old.state_lease, new.state_lease),
        ("control_socket", old.control_socket, new.control_socket),
        ("lineage.enabled", old.lineage.enabled, new.lineage.enabled),
        ("lineage.spool", old.lineage.spool, new.lineage.spool),
    ):
        if before != after:
            log.warning("reload_needs_restart", key=key, running=before, configured=after)
    rebuild = deliveries.to_rebuild(old.lineage, new.lineage)
    # In a thread: the checks read the key and CA files, which may sit on a slow mount.
    checked = await asyncio.to_thread(check_startup, new, transports=rebuild)
    signer = signer_of(checked)
    holder = deliveries.file_lock_holder(new.lineage.file.path)
    transports = await build_transports(
        new.lineage, rebuild, file_lock_of=holder, metrics=deliveries.metrics
    )
    try:
        _commit(new, signer, transports, pipeline, deliveries)
    except BaseException:
        # Not reached with a config the loader accepted; if it were, the transports built
        # for it must not leak (the file transport's would hold its path's lock).
        for transport in transports.values():
            with contextlib.suppress(Exception):
                await transport.aclose()
        raise
    await deliveries.swap_in(transports)


def _commit(
    new: AgentConfig,
    signer: Signer,
    transports: dict[str, Transport],
    pipeline: Pipeline,
    deliveries: Deliveries,
) -> None:
    """Put the checked new config in force: signer, logging, queues, added and removed
    transports (replaced transports are swapped in by the caller)."""
    pipeline.set_signer(signer.sign_event)
    pipeline.set_shape(shaping(new.lineage))
    logs.configure(new.logging.level, new.logging.format)
    deliveries.reconfigure(new.lineage, transports)
