# Journey (issue 56): a node speaking only reconciliation message version
# 1 (PITH_TEST_RECON_VERSION=1, as nodes before version 2) and nodes of
# version 2 reconcile with `pithctl --node SOCKET sync PEER` both ways and
# end with identical stores; the command prints the session's version.
add_test(NAME journey_recon_versions
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/recon_versions.py
          --pithd $<TARGET_FILE:pithd> --pithctl $<TARGET_FILE:pithctl>
          --gen-events $<TARGET_FILE:gen_events>)
set_tests_properties(journey_recon_versions PROPERTIES LABELS journey TIMEOUT 180)
