"""vramgui.sources"""
