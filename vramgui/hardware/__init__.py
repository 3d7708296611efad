"""vramgui.hardware"""
