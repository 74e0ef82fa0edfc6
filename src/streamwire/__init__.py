"""streamwire: typed, resumable Server-Sent Events."""
