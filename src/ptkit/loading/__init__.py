"""Which native library may load where, decided without torch: manifests
(``manifest``), the loader's rules (``rules``), the environment switches
(``switches``), the packages that ship ptkit-built libraries (``packages``) and which
implementation serves each op (``routes``). ``ptkit.runtime`` applies these rules inside
a torch process; ``ptkit doctor`` applies them to facts it read off disk.
"""
