"""Dispatch: how work leaves a transaction and reaches whoever does it.

One package for every way a job travels, used alike by the web processes, the embedded default
and the Celery workers:

- :mod:`~inbots.dispatch.jobs` — what a job is (:class:`Job`), what running one says should happen
  next (:class:`Result`), the task and queue names;
- :mod:`~inbots.dispatch.effects` — :class:`Effects`, what a unit of work hands its buffered jobs
  and wake-ups to after it commits, and :class:`Dispatch`, the app's implementation;
- :mod:`~inbots.dispatch.publisher` — the Celery publisher (by task name: ``inbots`` never imports
  ``workers``) and the Celery settings shared with the worker app;
- :mod:`~inbots.dispatch.local` — the embedded default's broker: thread pools and a timer running
  the very functions the Celery tasks wrap;
- :mod:`~inbots.dispatch.follow` — "after a notify, schedule what comes next", shared by both;
- :mod:`~inbots.dispatch.wakeups` — long-poll wake-ups and their Redis relay between processes;
- :mod:`~inbots.dispatch.limiter` — the per-URL in-flight cap, as leases;
- :mod:`~inbots.dispatch.broker` — is the broker there, and how deep are its queues.

Nothing here knows what a notification is: the delivery engine (:mod:`inbots.engine`)
hands the local dispatcher its ``notify`` and ``sweep`` functions. This package imports no domain
and sits below them all; this module imports nothing, so importing :mod:`inbots.dispatch.jobs`
stays cheap.
"""
