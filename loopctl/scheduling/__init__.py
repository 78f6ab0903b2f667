"""When loops run: due times (pure), the scheduler, file watches and the `up` daemon."""
