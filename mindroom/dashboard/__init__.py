"""mindroom.dashboard"""
