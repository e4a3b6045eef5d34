from tests.support.network_guard import no_external_network

__all__ = ["no_external_network"]
