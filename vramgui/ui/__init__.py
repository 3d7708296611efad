"""vramgui.ui"""
