"""The Kubernetes side: watches into the cache, decisions out to the API server.

The core never imports this package; it talks to it through the receivers of
`vscheduler.scheduler` (binder, evictor, status writer, event sink) and the cache's
methods.
"""
