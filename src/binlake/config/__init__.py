"""The settings model (`settings`), the job commands' grammar that builds it (`command_line`)
and the secrets a config names (`secrets`).
"""
