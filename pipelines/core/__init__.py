"""The framework that knows no stage by name: config assembly, the chain declaration, tables, session,
runs and resume, the stage runner, storage, progress and tracking."""
