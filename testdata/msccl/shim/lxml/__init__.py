# Stand-in for lxml, which msccl-tools imports but this machine cannot
# install: the XML emitter only needs what the standard library's
# ElementTree provides (Element, SubElement, indent, tostring).
