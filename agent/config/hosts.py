"""Hosts and ports read from text the agent does not trust (an event log's environment), and
the host patterns an operator narrows the agent's lookups with (`liveness.allowed_hosts`).

A value is a host and at most a port, nothing else: a host name of RFC 1123 labels, an IPv4
literal in dotted-quad form, or an IPv6 literal (bracketed where a port may follow), and a
port of 1 to 65535 written in digits. Anything that would make it a URL (user info, a path, a
query, a fragment) or that no host name holds (whitespace, control characters, `%`, a name
ending in a dot or in an all-numeric label that `inet_aton` would read as an address) is
refused with a `RefusalReason`, never repaired. No I/O and no regular expression here: each
check is one pass over at most `MAX_TEXT` characters.

Addresses the agent never contacts (`forbidden_address`, `forbidden_name`): link-local
(169.254.0.0/16, fe80::/10, where clouds serve instance metadata and credentials), the cloud
metadata services' own addresses and names, unspecified and multicast addresses; an
IPv4-mapped IPv6 address is judged by its IPv4 address.
"""

from __future__ import annotations

import ipaddress
import typing
import unicodedata
from dataclasses import dataclass
from typing import Final, Literal

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Why a host, a port or a lookup was refused: the `reason` label of
#: `lineage_liveness_refused_total`.
RefusalReason = Literal[
    "userinfo",  # `user:password@` before the host
    "path",
    "query",
    "fragment",
    "whitespace",
    "control",  # control or format characters
    "bad_host",  # not a host name, an IPv4 or an IPv6 literal
    "bad_port",  # not digits, 0, or above 65535
    "bad_app_id",  # not an application id Spark gives
    "forbidden_address",  # link-local, cloud metadata, unspecified or multicast
    "not_allowed",  # outside `liveness.allowed_hosts`
    "unresolved",  # a name that resolves to no address
    "rate_limited",  # no request allowed within the look's wait for the global rate
]
REFUSAL_REASONS: Final[tuple[RefusalReason, ...]] = typing.get_args(RefusalReason)

MAX_TEXT: Final = 300  # a host name has at most 253 characters, a port 5 more

#: Cloud instance metadata services: AWS (IPv4 is link-local; its IPv6 is not), Alibaba, GCP.
METADATA_ADDRESSES: Final = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
METADATA_NAMES: Final = frozenset({"metadata.google.internal", "metadata.goog", "metadata"})


@dataclass(frozen=True, slots=True)
class Address:
    """A host (a lower-case name, or an IP literal without brackets) and its port, if given."""

    host: str
    port: int | None = None

    @property
    def ip(self) -> IPAddress | None:
        """The host as an address when it is an IP literal."""
        try:
            return ipaddress.ip_address(self.host)
        except ValueError:
            return None

    def shown(self, port: int) -> str:
        """`host:port`, the IPv6 literal bracketed: how answers and logs name it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{port}"


def parse_host(text: object) -> Address | RefusalReason:
    """A host alone (`spark.driver.host`): a name, an IPv4 or an IPv6 literal (bracketed or
    not); a port is refused here."""
    if not isinstance(text, str):
        return "bad_host"
    tainted = _tainted(text)
    if tainted is not None:
        return tainted
    inner = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if ":" in inner:
        return _ipv6(inner)
    host = _host(inner)
    return Address(host) if host is not None else "bad_host"


def parse_authority(text: object) -> Address | RefusalReason:
    """`host[:port]` or `[v6][:port]` (`yarn.resourcemanager.webapp.address`)."""
    if not isinstance(text, str):
        return "bad_host"
    tainted = _tainted(text)
    if tainted is not None:
        return tainted
    if text.startswith("["):
        inner, bracket, rest = text[1:].partition("]")
        if not bracket:
            return "bad_host"
        address = _ipv6(inner)
        if isinstance(address, str) or not rest:
            return address
        if not rest.startswith(":"):
            return "bad_host"
        port = parse_port(rest[1:])
        return "bad_port" if port is None else Address(address.host, port)
    name, colon, port_text = text.partition(":")
    host = _host(name)
    if host is None or ":" in port_text:
        return "bad_host"
    if not colon:
        return Address(host)
    port = parse_port(port_text)
    return "bad_port" if port is None else Address(host, port)


def parse_port(text: object) -> int | None:
    """1 to 65535 written in at most five ASCII digits (no sign, space or underscore)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text if 0 < text <= 65535 else None
    if not isinstance(text, str) or not 0 < len(text) <= 5 or not text.isascii():
        return None
    if not text.isdigit():
        return None
    port = int(text)
    return port if 0 < port <= 65535 else None


def forbidden_address(address: IPAddress) -> bool:
    """Whether the agent must never connect to `address`."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return (
        address in METADATA_ADDRESSES
        or address.is_link_local
        or address.is_unspecified
        or address.is_multicast
    )


def forbidden_name(host: str) -> bool:
    """Whether `host` names a metadata service (or is a literal of a forbidden address)."""
    literal = Address(host).ip
    if literal is not None:
        return forbidden_address(literal)
    return host.lower() in METADATA_NAMES


# -- the operator's patterns ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HostPatterns:
    """`liveness.allowed_hosts`: exact names, `*.suffix` wildcards (any name below the suffix,
    not the suffix itself) and networks (an IP literal is a network of one). Empty allows
    every host that is not forbidden."""

    names: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()
    networks: tuple[IPNetwork, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.names or self.suffixes or self.networks)

    def allows_name(self, host: str) -> bool:
        host = host.lower()
        return host in self.names or any(host.endswith(s) for s in self.suffixes)

    def allows_address(self, address: IPAddress) -> bool:
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in network for network in self.networks)


def host_pattern_problem(text: str) -> str | None:
    """Why `text` is not a host pattern, or None when it is one."""
    if text.startswith("*."):
        return None if _host(text[2:]) is not None else "expected a host name after '*.'"
    if "/" in text and "://" not in text:
        try:
            ipaddress.ip_network(text, strict=False)
        except ValueError:
            return "not a network in CIDR notation (10.0.0.0/8, fd00::/8)"
        return None
    if not isinstance(parse_host(text), Address):
        return "expected a host name, `*.domain`, an IP address or a CIDR network"
    return None


def host_patterns(texts: tuple[str, ...]) -> HostPatterns:
    """The patterns of `texts`, each valid (`host_pattern_problem` is None for each)."""
    names: set[str] = set()
    suffixes: list[str] = []
    networks: list[IPNetwork] = []
    for text in texts:
        if text.startswith("*."):
            suffixes.append("." + text[2:].lower())
        elif "/" in text:
            networks.append(ipaddress.ip_network(text, strict=False))
        else:
            parsed = parse_host(text)
            if isinstance(parsed, Address):
                literal = parsed.ip
                if literal is None:
                    names.add(parsed.host)
                else:
                    networks.append(ipaddress.ip_network(literal))
    return HostPatterns(frozenset(names), tuple(suffixes), tuple(networks))


# -- the grammar ---------------------------------------------------------------------------------


def _tainted(text: str) -> RefusalReason | None:
    """What makes `text` more than a host and a port, the first found in this order."""
    if not text or len(text) > MAX_TEXT:
        return "bad_host"
    for char in text:
        if char.isspace():
            return "whitespace"
        if unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Cn"):
            return "control"
    for char, reason in (("@", "userinfo"), ("/", "path"), ("?", "query"), ("#", "fragment")):
        if char in text:
            return reason  # type: ignore[return-value]
    return None


def _host(text: str) -> str | None:
    """`text` as a lower-case RFC 1123 host name or a dotted-quad IPv4 literal, else None."""
    if not text or len(text) > 253 or not text.isascii():
        return None
    labels = text.split(".")
    if all(_numeric(label) for label in labels):
        try:
            return str(ipaddress.IPv4Address(text))  # four parts, no leading zeros
        except ValueError:
            return None
    if labels[-1].isdigit():
        return None  # `1.2.3` or `x.1`: inet_aton would take it for an address
    for label in labels:
        if not 0 < len(label) <= 63 or label[0] == "-" or label[-1] == "-":
            return None
        if not all(c.isalnum() or c == "-" for c in label):
            return None
    return text.lower()


def _numeric(label: str) -> bool:
    """A label `inet_aton` reads as a number: decimal, octal or 0x-hexadecimal."""
    hexadecimal = label[:2].lower() == "0x" and all(
        c in "0123456789abcdefABCDEF" for c in label[2:]
    )
    return label.isdigit() or hexadecimal


def _ipv6(text: str) -> Address | RefusalReason:
    if "%" in text:
        return "bad_host"  # a zone id names an interface of this node
    try:
        return Address(str(ipaddress.IPv6Address(text)))
    except ValueError:
        return "bad_host"
