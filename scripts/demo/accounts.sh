# Sourced by scripts/demo.sh and scripts/demo-eth.sh, with $dir set:
# anonymous access is off, so an administrator account for the browser
# ($password) and an API token for the curl examples ($token, $auth), in
# the config file $dir/netloom.yaml that `netloom serve --config` reads.
rm -f "$dir"/netloom.htpasswd "$dir"/netloom.groups "$dir"/netloom.tokens
password=$(bin/netloom user add admin --admin --users "$dir/netloom.htpasswd" --groups "$dir/netloom.groups" | sed -n 's/^password: //p')
token=$(bin/netloom token add admin --label demo --tokens "$dir/netloom.tokens" 2>/dev/null)
auth=(-H "Authorization: Bearer $token")
printf 'auth:\n  users_file: %s\n  groups_file: %s\n  tokens_file: %s\n' \
  "$dir/netloom.htpasswd" "$dir/netloom.groups" "$dir/netloom.tokens" > "$dir/netloom.yaml"
