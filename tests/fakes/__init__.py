"""Wire-true fakes: loopback HTTP servers and a fake `claude` executable for provider tests."""
