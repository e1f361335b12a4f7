"""The router under management: the ``$management`` node on the data path
(``node``), the management entities of what the adapter owns and the agent
built over every entity source (``entities``), and router-wide statistics
(``stats``).  The agent itself, pure, is ``router.management``.

Owns reading the adapter's parts for management and carrying out its
requests through the parts' ports; must not keep state of its own about them.
"""
