"""vramgui.profiles"""
