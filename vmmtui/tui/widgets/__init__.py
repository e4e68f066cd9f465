"""The inspector's widgets: each renders session events; none makes a driver call."""
