"""What a session is asked to do: its options, checked in one place (``config``), and the steps of
each role in seed order with their teaching text (``steps``)."""
