"""The loaded sslProfiles, and moving listeners and connectors onto new files.

Owns the profiles by name (read at start-up, added or replaced through
management, read again on SIGHUP), and, when a profile's files are read
again, giving the listeners and connectors that use it settings with the
new TLS domains: connections made from then on use the new certificates,
keys and CAs; open ones keep theirs.  All or nothing: when a profile, or a
listener's or connector's use of it, does not load, nothing changes.  It
is the ``sslProfile`` entities' store (``router.management.SslProfileStore``).
"""

from __future__ import annotations

import logging
from collections.abc import Container, Iterable, Mapping

import conf
from router import logs
from router.adapter.connections.ports import ConnectorControl, ListenerControl
from router.adapter.connections.settings import SaslError, connector_settings, listener_settings
from router.adapter.connections.state import Connector, Listener, Settings
from router.adapter.connections.tls import TlsError, TlsProfile, load_profiles
from router.management import ManagementError

log = logging.getLogger(__name__)


class Certificates:
    """The router's sslProfiles.

    Args:
        profiles: the profiles loaded at start-up, by name (this object keeps
            the dict up to date; others may read it).
        listeners: the listeners that may use them.
        connectors: the connectors that may use them.
        router_section: the router's conf section (listeners take its SASL settings).
        plugins: the ``authServicePlugin`` sections by name (listeners naming
            one delegate their SASL, through the profile it names).
    """

    def __init__(self, profiles: dict[str, TlsProfile], listeners: ListenerControl,
                 connectors: ConnectorControl, router_section: conf.RouterSection,
                 plugins: Mapping[str, conf.AuthServicePluginSection] | None = None) -> None:
        self.profiles = profiles
        self.plugins: Mapping[str, conf.AuthServicePluginSection] = plugins or {}
        self.listeners = listeners
        self.connectors = connectors
        self.router_section = router_section

    def load_all(self, sections: Iterable[conf.SslProfileSection]) -> dict[str, TlsProfile]:
        """Read ``sections``' files as the sslProfiles of their names (new ones
        are added) and move the listeners and connectors that use them onto
        the new domains.

        Returns:
            The profiles read, by name.

        Raises:
            TlsError: naming the profile and the file that does not load.
            SaslError: a connector's saslPassword can no longer be read.
        """
        loaded = load_profiles(sections)
        profiles = {**self.profiles, **loaded}
        using_listeners, using_connectors = self.using(loaded)
        listeners = [(li, listener_settings(li.settings.section, profiles,
                                            self.router_section, self.plugins))
                     for li in using_listeners]
        connectors = [(c, connector_settings(c.settings.section, profiles))
                      for c in using_connectors]
        self.profiles.update(loaded)
        for listener, listener_new in listeners:
            listener.settings = listener_new
        for connector, connector_new in connectors:
            connector.settings = connector_new
        return loaded

    def using(self, names: Container[str]) -> tuple[list[Listener], list[Connector]]:
        """The listeners and connectors whose conf names one of the sslProfiles ``names``."""
        def uses(settings: Settings) -> bool:
            section = settings.section
            return section is not None and section.ssl_profile in names
        return ([li for li in self.listeners.listeners.values() if uses(li.settings)],
                [c for c in self.connectors.connectors if uses(c.settings)])

    def reload(self) -> bool:
        """Read every sslProfile's files again (SIGHUP), as ``load_all``; when
        a profile no longer loads, the previous files stay in use and the
        error is logged.  Returns whether the new files took effect."""
        if not self.profiles:
            return True
        try:
            loaded = self.load_all([p.section for p in self.profiles.values()])
        except (TlsError, SaslError) as exc:
            log.error("TLS profiles not reloaded, the previous ones stay in use: %s", exc)
            return False
        log.log(logs.NOTICE, "TLS profiles reloaded (%d): new connections use the "
                "files as they are now", len(loaded))
        return True

    # -- the sslProfile entities' store ---------------------------------------------

    def sections(self) -> Iterable[conf.SslProfileSection]:
        return [profile.section for profile in self.profiles.values()]

    def load(self, section: conf.SslProfileSection) -> None:
        replaced = section.name in self.profiles
        try:
            self.load_all([section])
        except (TlsError, SaslError) as error:
            raise ManagementError(400, str(error)) from None
        log.log(logs.NOTICE, "sslProfile %r %s: connections made from now on use its files "
                "as they are now", section.name, "reloaded" if replaced else "loaded")

    def users(self, name: str) -> list[str]:
        listeners, connectors = self.using({name})
        return ([f"listener {li.settings.name or f'{li.host}:{li.port}'!r}" for li in listeners]
                + [f"connector {c.settings.name or c.address!r}" for c in connectors])

    def remove(self, name: str) -> None:
        del self.profiles[name]


__all__ = ["Certificates"]
